// echo-latency.mjs — keystroke echo latency in the page, idle and while a
// log view streams a big log over the same socket.
//
//   node --experimental-websocket web/bench/echo-latency.mjs [--mb 100] [--keys 200]
//
// A key is fed to xterm as user input (term.input) and timed until the
// shell's echo has been parsed by xterm (onWriteParsed): socket, server,
// PTY, bash and the renderer's parser, all in the measurement. Prints p50,
// p99 and the loaded/idle ratio; the target is loaded p99 <= 50 ms.
import { open, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemon } from '../testlib/daemon.mjs';
import { launch } from '../testlib/browser.mjs';

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const MB = arg('mb', 100);
const KEYS = arg('keys', 200);
// --no-view: run the same process without opening its log (the CPU cost of
// producing the output, without streaming it): separates the page's share.
const NO_VIEW = process.argv.includes('--no-view');

// The log is a file written beforehand, so producing it costs one cat, not
// a pipeline competing for the CPU with what is measured.
const dir = await mkdtemp(join(tmpdir(), 'muxd-bench-'));
const logFile = join(dir, 'log.txt');
{
  const f = await open(logFile, 'w');
  const line = 'x'.repeat(99) + '\n';
  const block = Buffer.from(line.repeat(10000)); // 1 MB
  for (let i = 0; i < MB; i++) await f.write(block);
  await f.close();
}

const d = await startDaemon();
const browser = await launch();
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  page.on("console", (m) => process.env.BENCH_DEBUG && console.log("page:", m.text()));
  await page.goto(d.url);
  await page.waitForFunction(() => {
    const v = globalThis.muxd?.tabs.active?.view;
    return v && v.ch && !v.replaying;
  }, null, { timeout: 15000 });
  // Let the shell print its prompt and settle.
  await page.evaluate(() => new Promise((r) => setTimeout(r, 500)));

  const measure = (keys) =>
    page.evaluate(async (keys) => {
      const view = globalThis.muxd.tabs.active.view;
      const term = view.term;
      // When the echo's DATA frame reached the page: splits the latency
      // into transport+server+shell and in-page parse.
      let arrived = 0;
      const h = view.ch.handlers;
      const onData = h.onData;
      h.onData = (b, c) => {
        arrived = performance.now();
        onData(b, c);
      };
      const inPage = [];
      const lineText = () => {
        const b = term.buffer.active;
        return b.getLine(b.baseY + b.cursorY)?.translateToString(true) ?? '';
      };
      const samples = [];
      let typed = '';
      for (let i = 0; i < keys; i++) {
        if (typed.length >= 40) {
          term.input('\x15', true); // Ctrl-U: clear the line
          typed = '';
          await new Promise((r) => setTimeout(r, 20));
        }
        const ch = String.fromCharCode(97 + (i % 26));
        typed += ch;
        const want = typed;
        const t0 = performance.now();
        const t = await new Promise((resolve) => {
          const timer = setTimeout(() => {
            sub.dispose();
            console.log('timeout', JSON.stringify(want), JSON.stringify(lineText()));
            resolve(5000);
          }, 5000);
          const sub = term.onWriteParsed(() => {
            if (lineText().endsWith(want)) {
              clearTimeout(timer);
              sub.dispose();
              inPage.push(performance.now() - arrived);
              resolve(performance.now() - t0);
            }
          });
          term.input(ch, true);
        });
        samples.push(t);
        await new Promise((r) => setTimeout(r, 5));
      }
      term.input('\x15', true);
      h.onData = onData;
      return { samples, inPage };
    }, keys);

  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
    return { p50: q(0.5), p99: q(0.99), max: s[s.length - 1] };
  };

  const idleRun = await measure(KEYS);
  const idle = stats(idleRun.samples);
  const idleIn = stats(idleRun.inPage);
  await page.evaluate(() => {
    globalThis.__long = [];
    new PerformanceObserver((l) => globalThis.__long.push(...l.getEntries().map((e) => e.duration))).observe({ type: 'longtask' });
  });

  // Load: a process writing MB megabytes, followed by an open log view.
  const load = await page.evaluate(async ({ noView, logFile }) => {
    const client = globalThis.muxd.client;
    try {
      const p = await client.call('process.start', { command: `cat ${logFile}` });
      if (noView) return { kind: 'no log view: producer only', id: p.id };
      globalThis.muxd.tabs.openLog(p);
      globalThis.muxd.tabs.activate(globalThis.muxd.tabs.tabs[0]);
      return { kind: 'log view', id: p.id };
    } catch (err) {
      if (err.reason !== 'method_not_found') throw err;
      // No process.* in this build: flood a second terminal instead.
      const t = await client.call('terminal.create', {});
      const ch = await client.open('terminal', { id: t.id }, { onData: (b, c) => c.consume(b.length) });
      ch.write(`cat ${logFile}; exit\n`);
      return { kind: 'second terminal (process.* missing)', id: t.id };
    }
  }, { noView: NO_VIEW, logFile });
  const t0 = Date.now();
  const loadedRun = await measure(KEYS);
  const loaded = stats(loadedRun.samples);
  const loadedIn = stats(loadedRun.inPage);
  const streamed = await page.evaluate(() => {
    const log = globalThis.muxd.tabs.tabs.find((t) => t.kind === 'log');
    return log ? log.view.store.next.stdout : -1;
  });
  const long = await page.evaluate(() => globalThis.__long.sort((a, b) => b - a));
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`echo latency over ${KEYS} keys (ms)      p50     p99     max`);
  console.log(`idle                               ${f(idle.p50)} ${f(idle.p99)} ${f(idle.max)}`);
  console.log(`while streaming ${MB} MB (${load.kind})`);
  console.log(`                                   ${f(loaded.p50)} ${f(loaded.p99)} ${f(loaded.max)}`);
  console.log(`  of which in the page (frame arrival → parsed): idle p99 ${idleIn.p99.toFixed(1)}, loaded p99 ${loadedIn.p99.toFixed(1)} ms`);
  console.log(`ratio loaded/idle p99: ${(loaded.p99 / idle.p99).toFixed(2)}   target p99 <= 50 ms: ${loaded.p99 <= 50 ? 'met' : 'NOT met'}`);
  console.log(`main-thread long tasks while loaded: ${long.length}, longest ${long.slice(0, 5).map((x) => x.toFixed(0)).join(', ')} ms`);
  if (streamed >= 0) console.log(`log view had received ${(streamed / 1e6).toFixed(1)} MB after ${((Date.now() - t0) / 1000).toFixed(1)} s of typing`);
  await ctx.close();
} finally {
  await browser.close();
  await d.stop();
  await rm(dir, { recursive: true, force: true });
}
