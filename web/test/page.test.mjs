// End-to-end tests of the page in Debian's headless Chromium against the
// real muxd binary.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemon } from '../testlib/daemon.mjs';
import { haveChromium, launch } from '../testlib/browser.mjs';

const skip = haveChromium ? false : 'no Chromium (apt-get install chromium, or set CHROMIUM_BIN)';

// termText returns the active terminal's whole buffer (scrollback included).
function termText(page) {
  return page.evaluate(() => {
    const term = globalThis.muxd.tabs.active?.view?.term;
    if (!term) return '';
    const b = term.buffer.active;
    const out = [];
    for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? '');
    return out.join('\n');
  });
}

async function waitTerm(page, re, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const t = await termText(page);
    const m = t.match(re);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`terminal never showed ${re}; it shows:\n${t.trimEnd().slice(-1500)}`);
    await page.waitForTimeout(30);
  }
}

// waitPrompt waits until the active terminal is attached and its shell
// shows a prompt: bash may drop what is typed while it starts.
function waitPrompt(page) {
  return page.waitForFunction(() => {
    const v = globalThis.muxd?.tabs.active?.view;
    if (!v || !v.ch || v.replaying) return false;
    const b = v.term.buffer.active;
    const line = b.getLine(b.baseY + b.cursorY)?.translateToString(true) ?? '';
    return /[$#>] ?$/.test(line);
  }, null, { timeout: 20000 });
}

// freshTerminal opens a new terminal tab and waits for its prompt.
async function freshTerminal(page) {
  await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
  await page.evaluate(() => globalThis.muxd.tabs.newTerminal());
  await waitPrompt(page);
}

// typeLine types into the focused terminal once its shell is ready.
async function typeLine(page, text) {
  await waitPrompt(page);
  await page.locator('.pane.term:not([hidden]) .xterm-helper-textarea').focus();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

// recordSent makes the active terminal record what it sends in
// globalThis.sentKeys (as text), still sending it.
function recordSent(page) {
  return page.evaluate(() => {
    const v = globalThis.muxd.tabs.active.view;
    const got = [];
    const write = v.ch.write.bind(v.ch);
    v.ch.write = (data) => {
      got.push(typeof data === 'string' ? data : new TextDecoder().decode(data));
      return write(data);
    };
    globalThis.sentKeys = got;
  });
}

// closePage ends the terminals the test made (tests share one daemon, and
// a new page opens a tab for every live terminal), then the page.
async function closePage(ctx, page) {
  await page.evaluate(async () => {
    const c = globalThis.muxd?.client;
    if (!c || c.state !== 'open') return;
    const { terminals } = await c.call('terminal.list');
    await Promise.all(terminals.map((t) => c.call('terminal.destroy', { id: t.id }).catch(() => {})));
  }).catch(() => {});
  await ctx.close();
}

async function openPage(browser, d, { width = 1200, height = 800, scheme = 'dark' } = {}) {
  const ctx = await browser.newContext({ viewport: { width, height }, colorScheme: scheme });
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(d.url);
  return { ctx, page, errors };
}

describe('the page in Chromium', { skip }, () => {
  let d;
  let browser;
  before(async () => {
    [d, browser] = await Promise.all([startDaemon(), launch()]);
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  test('a terminal appears, echoes, and follows the viewport size', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await page.waitForSelector('.pane.term .xterm-rows', { timeout: 10000 });
      await page.waitForSelector('#conn[data-state="open"]');
      await typeLine(page, 'echo web-$((6*7))');
      await waitTerm(page, /^web-42$/m);

      await typeLine(page, 'stty size; echo size-done');
      const [, r1, c1] = await waitTerm(page, /^(\d+) (\d+)\nsize-done/m);
      await page.setViewportSize({ width: 900, height: 500 });
      await page.waitForFunction(
        ([r, c]) => {
          const t = globalThis.muxd.tabs.active.view;
          return t.size && (t.size.rows !== r || t.size.cols !== c);
        },
        [Number(r1), Number(c1)],
        { timeout: 5000 },
      );
      await page.keyboard.type('clear; stty size; echo size2-done');
      await page.keyboard.press('Enter');
      const [, r2, c2] = await waitTerm(page, /^(\d+) (\d+)\nsize2-done/m);
      assert.ok(Number(r2) < Number(r1), `rows: got ${r2} after shrinking, had ${r1}`);
      assert.ok(Number(c2) < Number(c1), `cols: got ${c2} after shrinking, had ${c1}`);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('Ctrl+V pastes the clipboard into the terminal', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.url });
      await page.waitForSelector('#conn[data-state="open"]');
      await page.waitForSelector('.pane.term .xterm-rows', { timeout: 10000 });
      await typeLine(page, 'echo ready-$((1+1))');
      await waitTerm(page, /^ready-2$/m);
      await page.evaluate(() => navigator.clipboard.writeText('echo pasted-$((2+3))'));
      await page.keyboard.press('Control+V');
      await page.keyboard.press('Enter');
      await waitTerm(page, /^pasted-5$/m);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('the page\'s first terminal does not take the keys from a form the user is typing in', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e));
    // The daemon's messages wait until the user is in the form, so the
    // page creates its first terminal only after that.
    let release;
    const held = new Promise((r) => { release = r; });
    await page.routeWebSocket(/\/ws(\?|$)/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => server.send(m));
      server.onMessage(async (m) => {
        await held;
        ws.send(m);
      });
    });
    try {
      await page.goto(d.url);
      await page.focus('#proc-form input[name=command]');
      await page.keyboard.type('echo from-the-form');
      release();
      await page.waitForFunction(() => globalThis.muxd.tabs.active?.view?.ch, null, { timeout: 10000 });
      await waitTerm(page, /\S/); // the shell is attached: a focus would have come by now
      assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Process command');
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => [...document.querySelectorAll('.pane.log:not([hidden]) .ln')]
        .some((e) => e.textContent.split('\n').includes('from-the-form')), null, { timeout: 15000 });
      assert.doesNotMatch(await termText(page), /from-the-form/);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('on a phone the key bar sends Ctrl-C and a sticky Ctrl', async () => {
    const { ctx, page, errors } = await openPage(browser, d, { width: 390, height: 760 });
    try {
      await freshTerminal(page);
      await typeLine(page, 'sleep 30; echo slept-through');
      await page.click('#keybar button[title="Ctrl-C"]');
      await typeLine(page, 'echo after-$((2*3))-int');
      await waitTerm(page, /^after-6-int$/m, 5000);
      // Sticky Ctrl then "l" clears the screen (Ctrl-L).
      await page.click('#keybar [data-ctrl]');
      assert.equal(await page.getAttribute('#keybar [data-ctrl]', 'aria-pressed'), 'true');
      await page.keyboard.type('l');
      await page.waitForSelector('#keybar [data-ctrl][aria-pressed="false"]', { timeout: 5000 });
      assert.doesNotMatch(await termText(page), /slept-through/);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('the session field keeps state between runs and starts processes from it', async (t) => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      const has = await page.evaluate(() =>
        globalThis.muxd.client.call('session.list').then(() => true, (e) => e.reason !== 'method_not_found'));
      if (!has) return t.skip('sessions not in this build yet');
      const run = async (command) => {
        await page.fill('#exec-form input[name=session]', 'web-s1');
        await page.fill('#exec-form input[name=command]', command);
        await page.press('#exec-form input[name=command]', 'Enter');
        await page.waitForSelector('.exec-status >> text=/exit code/', { timeout: 10000 });
        return page.textContent('.exec-body');
      };
      await run('cd /tmp && export WEB_S1=kept');
      assert.match(await run('echo "$PWD $WEB_S1"'), /\/tmp kept/);
      await page.fill('#proc-form input[name=session]', 'web-s1');
      await page.fill('#proc-form input[name=command]', 'echo "from-session $PWD $WEB_S1"');
      await page.press('#proc-form input[name=command]', 'Enter');
      await page.waitForFunction(() => /from-session \/tmp kept/.test(document.querySelector('.pane.log:not([hidden]) .log-live')?.textContent ?? ''),
        null, { timeout: 10000 });
      assert.match(await page.textContent('#proc-list'), /session web-s1/);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('keys (and xterm\'s answers to replayed queries) are not sent while a replay is drawn', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await freshTerminal(page);
      await recordSent(page);
      const sent = await page.evaluate(() => {
        const v = globalThis.muxd.tabs.active.view;
        const got = globalThis.sentKeys;
        v.replaying = true;
        v.term.input('during-replay', true);
        // A DA query drawn during replay: xterm answers through onData.
        return new Promise((resolve) => {
          v.term.write('\x1b[c', () => {
            v.replaying = false;
            v.term.input('X', true);
            resolve(got);
          });
        });
      });
      assert.deepEqual(sent, ['X']);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('a page opened on a full-screen program that outgrew the replay gets its screen, its modes and a redraw', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'muxd-page-'));
    const script = join(dir, 'fullscreen.sh');
    // More than the terminal's 1 MiB ring after entering the alternate
    // screen with application cursor keys and bracketed paste; then a
    // "redrawn-N" screen on each SIGWINCH, for at most 30 s.
    await writeFile(script, [
      "printf '\\033[?1049h\\033[?1h\\033[?2004h'",
      "head -c 1200000 /dev/zero | tr '\\0' x",
      'n=0',
      "trap 'n=$((n+1)); printf \"\\033[H\\033[2Jredrawn-%s\\n\" \"$n\"' WINCH",
      "printf '\\033[H\\033[2Jready\\n'",
      'for i in $(seq 600); do sleep 0.05; done',
      '',
    ].join('\n'));
    const first = await openPage(browser, d);
    let second;
    try {
      await typeLine(first.page, `bash ${script}`);
      await waitTerm(first.page, /^ready$/m, 30000);

      second = await openPage(browser, d);
      const { page } = second;
      await waitTerm(page, /^redrawn-\d+$/m, 20000); // a resize may add one
      const modes = await page.evaluate(() => {
        const term = globalThis.muxd.tabs.active.view.term;
        return { buffer: term.buffer.active.type, cursorKeys: term.modes.applicationCursorKeysMode, paste: term.modes.bracketedPasteMode };
      });
      assert.deepEqual(modes, { buffer: 'alternate', cursorKeys: true, paste: true });
      // The arrow keys send what the program asked for.
      await page.waitForFunction(() => !globalThis.muxd.tabs.active.view.replaying);
      await recordSent(page);
      await page.locator('.pane.term:not([hidden]) .xterm-helper-textarea').focus();
      await page.keyboard.press('ArrowUp');
      await page.waitForFunction(() => globalThis.sentKeys.length > 0);
      assert.deepEqual(await page.evaluate(() => globalThis.sentKeys), ['\x1bOA']);
      assert.deepEqual(first.errors, []);
      assert.deepEqual(second.errors, []);
    } finally {
      if (second) await second.ctx.close();
      await closePage(first.ctx, first.page);
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a new terminal takes a name no terminal has, whichever page opened it', async () => {
    const a = await openPage(browser, d);
    let b;
    try {
      await a.page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      await freshTerminal(a.page);
      const title = await a.page.evaluate(() => globalThis.muxd.tabs.active.view.title);
      // Ended, its tab stays on page a; a page opened now does not show it.
      await typeLine(a.page, 'exit');
      await a.page.waitForFunction(() => globalThis.muxd.tabs.active.view.exited, null, { timeout: 5000 });
      b = await openPage(browser, d);
      await b.page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      const other = await b.page.evaluate(async () => (await globalThis.muxd.tabs.newTerminal()).view.title);
      assert.notEqual(other, title);
      assert.deepEqual(a.errors, []);
      assert.deepEqual(b.errors, []);
    } finally {
      await closePage(a.ctx, a.page);
      if (b) await closePage(b.ctx, b.page);
    }
  });

  test('tabs: a new terminal, rename with F2 (terminal.update), close destroys it', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await freshTerminal(page);
      const id = await page.evaluate(() => globalThis.muxd.tabs.active.view.id);
      const list = () => page.evaluate(() => globalThis.muxd.client.call('terminal.list').then((r) => r.terminals));
      await page.focus('.tab.active');
      assert.ok(await page.evaluate(() => document.activeElement?.classList.contains('tab')), 'the tab has the keyboard');
      await page.keyboard.press('F2');
      await page.waitForSelector('.tab-edit', { timeout: 5000 });
      await page.fill('.tab-edit', 'build box');
      await page.press('.tab-edit', 'Enter');
      await page.waitForSelector('.tab.active .tab-label >> text="build box"');
      await page.waitForFunction(async (id) => {
        const { terminals } = await globalThis.muxd.client.call('terminal.list');
        return terminals.find((t) => t.id === id)?.title === 'build box';
      }, id, { timeout: 5000 });
      const before = (await list()).length;
      // Its shell still runs: the first click only asks for a second one.
      await page.click('.tab.active .tab-close');
      await page.waitForSelector('text=/is still running: close it again/', { timeout: 5000 });
      assert.ok((await list()).some((t) => t.id === id && !t.exited), 'one click ended a running terminal');
      await page.click('.tab.active .tab-close');
      await page.waitForFunction(async (id) => {
        const { terminals } = await globalThis.muxd.client.call('terminal.list');
        return !terminals.some((t) => t.id === id && !t.exited);
      }, id, { timeout: 5000 });
      assert.ok((await list()).length < before);
      // The page drops the tab once its own terminal.destroy answers,
      // which can come after the list above already shows the end.
      await page.locator('.tab-label >> text="build box"').waitFor({ state: 'detached', timeout: 5000 });
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('wide characters take two columns, as in the shell', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await freshTerminal(page);
      await typeLine(page, "printf 'A\\360\\237\\230\\200|\\n'");
      await waitTerm(page, /^A.\|$/mu);
      // The bar sits in column 3 (0-based): the emoji took two cells.
      const col = await page.evaluate(() => {
        const buf = globalThis.muxd.tabs.active.view.term.buffer.active;
        for (let y = buf.length - 1; y >= 0; y--) {
          const line = buf.getLine(y);
          const text = line?.translateToString(true) ?? '';
          if (/^A.\|$/u.test(text)) {
            for (let x = 0; x < line.length; x++) if (line.getCell(x)?.getChars() === '|') return x;
          }
        }
        return -1;
      });
      assert.equal(col, 3, 'the emoji should take two cells');
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('after the socket breaks the page reconnects and resumes without duplicate lines', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await freshTerminal(page);
      await typeLine(page, 'for i in 1 2 3; do echo dup-$i-x; done');
      await waitTerm(page, /^dup-3-x$/m);
      const sawReconnect = page.waitForSelector('#conn[data-state="reconnecting"], #conn[data-state="connecting"]', { timeout: 5000 });
      await d.drop();
      await sawReconnect;
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      await typeLine(page, 'echo after-$((40+2))');
      await waitTerm(page, /^after-42$/m);
      const text = await termText(page);
      for (const i of [1, 2, 3]) {
        const n = text.split('\n').filter((l) => l === `dup-${i}-x`).length;
        assert.equal(n, 1, `dup-${i}-x shown ${n} times:\n${text.trimEnd()}`);
      }
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('what is typed while the socket reconnects is sent once it is back', async () => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await freshTerminal(page);
      await typeLine(page, 'echo before-$((1+1))');
      await waitTerm(page, /^before-2$/m);
      // No redial of its own: the keys below go in while there is no
      // socket, then reconnectNow brings it back.
      await page.evaluate(() => (globalThis.muxd.client.opts.backoffMs = [60000, 60000]));
      const sawReconnect = page.waitForSelector('#conn[data-state="reconnecting"]', { timeout: 5000 });
      await d.drop();
      await sawReconnect;
      await page.keyboard.type('echo typed-ahead-$((3*3))');
      await page.keyboard.press('Enter');
      assert.equal(await page.getAttribute('#conn', 'data-state'), 'reconnecting', 'typed after the reconnect');
      await page.evaluate(() => globalThis.muxd.client.reconnectNow());
      await waitTerm(page, /^typed-ahead-9$/m);

      // Past the bound none of it goes: not the Enter after a paste
      // that was dropped.
      await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.url });
      const sawAgain = page.waitForSelector('#conn[data-state="reconnecting"]', { timeout: 5000 });
      await d.drop();
      await sawAgain;
      await page.keyboard.type('echo hole-$((1+1)) ');
      await page.evaluate(() => navigator.clipboard.writeText('x'.repeat(5000)));
      await page.keyboard.press('Control+V');
      await page.keyboard.press('Enter');
      await page.evaluate(() => globalThis.muxd.client.reconnectNow());
      await waitTerm(page, /typed meanwhile: not sent/);
      await page.keyboard.press('Enter'); // a prompt after the notice
      await typeLine(page, 'echo after-$((2+2))');
      await waitTerm(page, /^after-4$/m);
      assert.doesNotMatch(await termText(page), /^hole-2/m);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('terminal credit waits for the renderer, except while the tab is hidden', async () => {
    const cases = [
      { name: 'visible: output stops at the window while xterm is stalled', hidden: false },
      { name: 'hidden: credit goes back on receipt, output keeps flowing', hidden: true },
    ];
    for (const tc of cases) {
      const { ctx, page, errors } = await openPage(browser, d);
      try {
        await freshTerminal(page);
        const total = 3000000;
        const got = await page.evaluate(async ({ hidden, total }) => {
          const v = globalThis.muxd.tabs.active.view;
          Object.defineProperty(document, 'hidden', { configurable: true, get: () => hidden });
          v.term.write = () => {}; // a renderer that never catches up
          const ch = v.ch;
          ch.write(`head -c ${total} /dev/zero | tr "\\0" y; echo\n`);
          const deadline = Date.now() + 15000;
          // Bounded wait: all bytes (hidden) or a stall at the window (visible).
          while (Date.now() < deadline && ch.received < total) {
            const before = ch.received;
            await globalThis.muxd.client.ping();
            await new Promise((r) => setTimeout(r, 200));
            await globalThis.muxd.client.ping();
            if (!hidden && ch.received === before && before > ch.window / 2) break;
          }
          return { received: ch.received, window: ch.window };
        }, { hidden: tc.hidden, total });
        if (tc.hidden) assert.ok(got.received >= total, `${tc.name}: received ${got.received} of ${total}`);
        else {
          assert.ok(got.received <= got.window, `${tc.name}: received ${got.received} on a ${got.window}-byte window`);
          assert.ok(got.received > got.window / 2, `${tc.name}: received only ${got.received}: the flood never started`);
        }
        assert.deepEqual(errors, []);
      } finally {
        await closePage(ctx, page);
      }
    }
  });

  test('a process printing 10,000 lines shows its last line in the log view', async (t) => {
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      const has = await page.evaluate(() =>
        globalThis.muxd.client.call('process.list').then(() => true, (e) => e.reason !== 'method_not_found'));
      if (!has) return t.skip('process.* not in this build yet');
      await page.fill('#proc-form input[name=command]', 'for i in $(seq 1 10000); do echo "log line $i"; done; echo oops >&2');
      await page.press('#proc-form input[name=command]', 'Enter');
      const shows = (sel, line) =>
        page.waitForFunction(([sel, line]) => [...document.querySelectorAll(sel)].some((e) => e.textContent.split('\n').includes(line)),
          [sel, line], { timeout: 15000 }).catch(async (err) => {
          const state = await page.evaluate(() => {
            const active = globalThis.muxd.tabs.active;
            const v = active?.view;
            return JSON.stringify({ tab: active?.key, next: v?.store?.next, seq: v?.store?.seq, drawn: v?.drawn, follow: v?.follow, frame: v?.frame,
              ended: v?.ended, eof: v?.eof, attached: !!v?.ch, proc: v?.proc, tail: v?.store?.lines.slice(-3),
              formMsg: document.querySelector('#proc-form .form-msg')?.textContent,
              startDisabled: document.querySelector('#proc-form button[type=submit]')?.disabled,
              procs: [...document.querySelectorAll('#proc-list .proc')].map((e) => e.textContent.slice(0, 60)) });
          });
          throw new Error(`${err.message}\nlog view state: ${state}`);
        });
      await shows('.pane.log:not([hidden]) .ln:not(.err)', 'log line 10000');
      // (Where "oops" lands among the stdout lines is approximate: muxd keeps
      // the order it read the two pipes in. It may be trimmed from the view.)
      // The view is bounded: far fewer elements than lines.
      assert.ok(await page.locator('.pane.log:not([hidden]) .ln').count() < 100);
      // The first lines were trimmed from the view; "Load earlier" fetches them.
      assert.doesNotMatch(await page.textContent('.pane.log:not([hidden]) .log-live'), /^log line 1$/m);
      await page.click('.pane.log:not([hidden]) button >> text="Load earlier"');
      await page.waitForFunction(() => [...document.querySelectorAll('.pane.log:not([hidden]) .log-earlier .ln')]
        .some((e) => e.textContent.split('\n').includes('log line 1')), null, { timeout: 10000 });
      await page.waitForSelector('#proc-list .chip.ok', { timeout: 5000 });
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('a log view resumes after the socket breaks, without duplicate or lost lines', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'muxd-webtest-trigger-'));
    const go = join(dir, 'go');
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      // The process waits for a file the test creates after the reconnect.
      const cmd = `for i in 1 2 3; do echo before-$i; done; while [ ! -e ${go} ]; do sleep 0.02; done; echo after-1; echo after-2 >&2`;
      await page.fill('#proc-form input[name=command]', cmd);
      await page.press('#proc-form input[name=command]', 'Enter');
      const logLines = () => page.evaluate(() =>
        [...document.querySelectorAll('.pane.log:not([hidden]) .log-live .ln')].flatMap((e) => e.textContent.split('\n')));
      await page.waitForFunction(() => document.querySelector('.pane.log:not([hidden]) .log-live')?.textContent.includes('before-3'), null, { timeout: 10000 });
      await d.drop();
      await page.waitForSelector('#conn:not([data-state="open"])', { timeout: 5000 });
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      await writeFile(go, '');
      await page.waitForFunction(() => document.querySelector('.pane.log:not([hidden]) .log-live')?.textContent.includes('after-2'), null, { timeout: 10000 });
      const lines = await logLines();
      const errLines = await page.evaluate(() =>
        [...document.querySelectorAll('.pane.log:not([hidden]) .log-live .ln.err')].flatMap((e) => e.textContent.split('\n')));
      assert.deepEqual(errLines, ['after-2'], 'stderr lines are told apart');
      for (const want of ['before-1', 'before-2', 'before-3', 'after-1', 'after-2']) {
        const n = lines.filter((l) => l === want).length;
        assert.equal(n, 1, `${want} shown ${n} times in ${JSON.stringify(lines)}`);
      }
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('the exec box streams output while the command runs, then shows the exit code; Cancel kills it', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'muxd-webtest-trigger-'));
    const go = join(dir, 'go');
    const { ctx, page, errors } = await openPage(browser, d);
    try {
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      const has = await page.evaluate(() =>
        globalThis.muxd.client.call('exec', { command: 'true' }).then(() => true, (e) => e.reason !== 'method_not_found'));
      if (!has) return t.skip('exec not in this build yet');
      const input = '#exec-form input[name=command]';
      await page.fill(input, `echo to-out; echo to-err >&2; while [ ! -e ${go} ]; do sleep 0.02; done; echo done-out; exit 3`);
      await page.press(input, 'Enter');
      // Streaming: the first lines show while the command still runs.
      await page.waitForFunction(() => /to-out/.test(document.querySelector('.exec-body')?.textContent ?? ''), null, { timeout: 10000 });
      assert.match(await page.textContent('.exec-status'), /running/);
      assert.equal((await page.textContent('.exec-body .err')).trim(), 'to-err');
      await writeFile(go, '');
      await page.waitForSelector('.exec-status >> text=/exit code 3/', { timeout: 10000 });
      assert.match(await page.textContent('.exec-body'), /to-out\n(.|\n)*done-out/);

      // A command that ends before the channel opens, with more output
      // than the exec answer carries (256 KiB): the retained output
      // replays whole, and nothing is said to be cut.
      await page.fill(input, 'seq 1 100000');
      await page.press(input, 'Enter');
      await page.waitForSelector('.exec-status >> text=/exit code 0/', { timeout: 10000 });
      assert.match(await page.textContent('.exec-body'), /\n99999\n100000\n?$/);
      assert.doesNotMatch(await page.textContent('.exec-status'), /truncated/);
      // Both streams of a command that ends at once, whole. (Their order
      // is the answer's, stdout first, when the channel opens after the
      // end and replays them; one opened in time shows them as they
      // come, in no order between streams.)
      await page.fill(input, 'echo first; echo second >&2');
      await page.press(input, 'Enter');
      await page.waitForSelector('.exec-status >> text=/exit code 0/', { timeout: 10000 });
      assert.deepEqual((await page.textContent('.exec-body')).split('\n').sort(), ['', 'first', 'second']);

      await page.fill(input, 'sleep 30');
      await page.press(input, 'Enter');
      await page.waitForSelector('#exec-form button.danger >> text=Cancel');
      await page.click('#exec-form button[type=submit]');
      await page.waitForSelector('.exec-status >> text=/cancelled/', { timeout: 5000 });
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the page across a daemon restart', { skip }, () => {
  let browser;
  const daemons = [];
  before(async () => {
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    for (const x of daemons) await x.stop();
  });

  test('reconnects to the new daemon, marks old terminals gone and opens a fresh one', async () => {
    const d1 = await startDaemon();
    daemons.push(d1);
    const { ctx, page, errors } = await openPage(browser, d1);
    try {
      await waitPrompt(page);
      const oldId = await page.evaluate(() => globalThis.muxd.tabs.active.view.id);
      await d1.stop();
      await page.waitForSelector('#conn[data-state="reconnecting"]', { timeout: 10000 });
      const d2 = await startDaemon({ port: d1.port });
      daemons.push(d2);
      await page.evaluate(() => globalThis.muxd.client.reconnectNow());
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 15000 });
      await page.waitForFunction((oldId) => {
        const tabs = globalThis.muxd.tabs.tabs;
        const old = tabs.find((t) => t.view.id === oldId);
        return old?.view.gone && tabs.some((t) => t.kind === 'term' && t.view.id !== oldId && t.view.ch);
      }, oldId, { timeout: 10000 });
      await typeLine(page, 'echo new-$((5*5))');
      await waitTerm(page, /^new-25$/m);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });
});

describe('the page against a daemon with a token', { skip }, () => {
  let d;
  let browser;
  before(async () => {
    [d, browser] = await Promise.all([startDaemon({ env: { MUXD_TOKEN: 'sesame-open-1234' } }), launch()]);
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  test('asks for the token, refuses a wrong one, then connects', async () => {
    const { ctx, page, errors } = await openPage(browser, d, { width: 390, height: 760, scheme: 'light' });
    try {
      const dialog = page.locator('dialog#auth');
      await dialog.waitFor({ state: 'visible', timeout: 10000 });
      await page.waitForSelector('#conn[data-state="auth"]');
      await dialog.locator('input[type=password]').fill('wrong-token');
      await dialog.locator('input[type=password]').press('Enter');
      await page.waitForSelector('dialog#auth .auth-msg >> text=/not accepted/');
      await dialog.locator('input[type=password]').fill('sesame-open-1234');
      await dialog.locator('input[type=password]').press('Enter');
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      await dialog.waitFor({ state: 'hidden' });
      await typeLine(page, 'echo token-$((1+1))');
      await waitTerm(page, /^token-2$/m);
      // A reload keeps the token for this tab (sessionStorage): no prompt.
      await page.reload();
      await page.waitForSelector('#conn[data-state="open"]', { timeout: 10000 });
      assert.equal(await dialog.isVisible(), false);
      assert.deepEqual(errors, []);
    } finally {
      await closePage(ctx, page);
    }
  });

  test('after too many wrong tokens, says to wait instead of "not accepted"', async () => {
    const { ctx, page } = await openPage(browser, d, { width: 390, height: 760, scheme: 'light' });
    try {
      await page.evaluate(() => sessionStorage.clear());
      await page.reload();
      const dialog = page.locator('dialog#auth');
      await dialog.waitFor({ state: 'visible', timeout: 10000 });
      const msg = dialog.locator('.auth-msg');
      let text = '';
      // 20 wrong tokens are answered 401; the daemon then refuses this
      // address's tokens (429) for a moment.
      for (let i = 0; i < 30 && !/Too many/.test(text); i++) {
        await dialog.locator('input[type=password]').fill(`wrong-${i}`);
        await dialog.locator('input[type=password]').press('Enter');
        await page.waitForFunction(() => {
          const t = document.querySelector('dialog#auth .auth-msg').textContent;
          return t && t !== 'Checking…';
        }, null, { timeout: 10000 });
        text = await msg.textContent();
      }
      assert.match(text, /Too many wrong tokens: wait a few seconds/);
    } finally {
      await closePage(ctx, page);
    }
  });
});
