// End-to-end: headless Chromium runs xterm.js with the real SandboxAddon
// from @cloudflare/sandbox@0.12.10 against the real muxd binary's
// /ws/terminal. The page is served from another origin, as behind the
// SDK's proxy (which forwards the browser's Origin), and muxd admits it
// through --allowed-origins.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { chromium } from 'playwright-core';
import { startDaemon } from '../../web/testlib/daemon.mjs';
import { buildAddonPage } from './build-addon-page.mjs';

const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : 'no Chromium (apt-get install chromium, or set CHROMIUM_BIN)';

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

// servePage serves dir on a free loopback port.
function servePage(dir) {
  const srv = createServer(async (req, res) => {
    const name = new URL(req.url, 'http://x').pathname.replace(/^\/+/, '') || 'index.html';
    if (name.includes('..') || name.includes('/')) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(join(dir, name));
      res.writeHead(200, { 'content-type': types[extname(name)] || 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((ok) => srv.listen(0, '127.0.0.1', () => ok(srv)));
}

describe('SandboxAddon from @cloudflare/sandbox@0.12.10 against muxd', { skip }, () => {
  let dir;
  let profile;
  let page;
  let ctx;
  let web;
  let d;
  let origin;
  let home;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'muxd-addon-page-'));
    // A fresh HOME: the shells must not depend on the machine's start-up files.
    home = await mkdtemp(join(tmpdir(), 'muxd-addon-home-'));
    profile = await mkdtemp(join(tmpdir(), 'muxd-addon-profile-'));
    await buildAddonPage(dir);
    web = await servePage(dir);
    origin = `http://127.0.0.1:${web.address().port}`;
    d = await startDaemon({ args: ['--allowed-origins', origin], env: { HOME: home } });
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e));
    page.pageErrors = pageErrors;
  });

  after(async () => {
    await ctx?.close();
    await d?.stop();
    await new Promise((r) => (web ? web.close(r) : r()));
    await rm(dir, { recursive: true, force: true });
    await rm(profile, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
  });

  const text = () => page.evaluate(() => globalThis.addonTest.text());

  async function waitText(re, ms = 15000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const t = await text();
      const m = t.match(re);
      if (m) return t;
      if (Date.now() > deadline) {
        throw new Error(`terminal never showed ${re}; it shows:\n${t.trimEnd().slice(-1500)}\nmuxd log:\n${d.log().slice(-2000)}`);
      }
      await page.waitForTimeout(30);
    }
  }

  // waitPrompt waits for a shell prompt at the cursor (bash may drop what
  // is typed while it starts).
  function waitPrompt() {
    return page.waitForFunction(() => {
      const { term, addon } = globalThis.addonTest;
      if (addon.state !== 'connected') return false;
      const b = term.buffer.active;
      const line = b.getLine(b.baseY + b.cursorY)?.translateToString(true) ?? '';
      return /[$#>] ?$/.test(line);
    }, null, { timeout: 20000 });
  }

  async function typeLine(s) {
    await waitPrompt();
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type(s);
    await page.keyboard.press('Enter');
  }

  test('types, sees output, reconnects with replay, and is told of the exit', async () => {
    const id = `addon-${process.pid}-${Date.now()}`;
    await page.goto(`${origin}/index.html?muxd=${encodeURIComponent(d.wsUrl.replace(/\/ws$/, ''))}&id=${id}`);

    // Type a command and see its output. The DA query is answered live by
    // xterm.js and consumed by `read`.
    await typeLine(`printf 'q\\033[c'; read -rs -d c -t 5 ans; echo "hello-$((6*7)) da=\${#ans}"`);
    await waitText(/hello-42 da=\d+/);

    // A dropped socket: the addon reconnects after ~1 s, clears the screen,
    // and muxd replays the retained output before ready.
    const socketsBefore = await page.evaluate(() => globalThis.addonTest.log.sockets);
    await page.evaluate(() => globalThis.addonTest.dropSocket());
    await page.waitForFunction((n) => globalThis.addonTest.log.sockets > n && globalThis.addonTest.addon.state === 'connected', socketsBefore, { timeout: 20000 });
    await waitText(/hello-42 da=\d+/);

    // The replayed DA query was not answered again into the shell: the
    // next command runs clean.
    await typeLine('echo "after-$((1+2))"');
    const t = await waitText(/^after-3$/m);
    assert.doesNotMatch(t, /\?1;2c|1;2c|command not found/, 'a replayed query was answered into the shell');

    // Exit: the addon reports the code, muxd closes with 1000, the addon
    // reconnects and gets a fresh terminal under the same id.
    const before = await page.evaluate(() => globalThis.addonTest.log.sockets);
    await typeLine('exit 7');
    await page.waitForFunction(() => globalThis.addonTest.log.errors.some((m) => /exited with code 7/.test(m)), null, { timeout: 15000 });
    await page.waitForFunction((n) => globalThis.addonTest.log.sockets > n && globalThis.addonTest.addon.state === 'connected', before, { timeout: 20000 });
    await typeLine('echo "fresh-$((2+2))"');
    const fresh = await waitText(/^fresh-4$/m);
    assert.doesNotMatch(fresh, /hello-42/, 'the fresh terminal replayed the exited one');

    const log = await page.evaluate(() => globalThis.addonTest.log);
    assert.ok(!log.errors.some((m) => /WebSocket error|Max reconnection/.test(m)), `addon errors: ${log.errors.join('; ')}`);
    assert.deepEqual(page.pageErrors, []);
  });
});
