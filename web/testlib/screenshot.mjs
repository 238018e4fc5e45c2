// screenshot.mjs — drives the page into a typical state and saves
// screenshots: docs/screenshot.png (laptop, dark) and, with --all, light and
// phone variants under OUT (default /tmp/muxd-shots) for a look by eye.
//
//   node --experimental-websocket web/testlib/screenshot.mjs [--all] [--out DIR]
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon.mjs';
import { launch } from './browser.mjs';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const all = process.argv.includes('--all');
const oi = process.argv.indexOf('--out');
const out = oi > 0 ? process.argv[oi + 1] : '/tmp/muxd-shots';

const d = await startDaemon();
const browser = await launch();
try {
  await mkdir(out, { recursive: true });
  const shots = [{ name: 'laptop-dark', width: 1280, height: 760, scheme: 'dark', docs: true }];
  if (all) {
    shots.push({ name: 'laptop-light', width: 1280, height: 760, scheme: 'light' });
    shots.push({ name: 'phone-dark', width: 390, height: 780, scheme: 'dark' });
    shots.push({ name: 'phone-light-procs', width: 390, height: 780, scheme: 'light', side: true });
  }
  let first = true;
  for (const s of shots) {
    const ctx = await browser.newContext({ viewport: { width: s.width, height: s.height }, colorScheme: s.scheme, deviceScaleFactor: 1 });
    const page = await ctx.newPage();
    await page.goto(d.url);
    await page.waitForFunction(() => {
      const v = globalThis.muxd?.tabs.active?.view;
      return v && v.ch && !v.replaying;
    }, null, { timeout: 15000 });
    if (first) {
      first = false;
      await page.keyboard.type("clear; ls --color=always -F /usr/lib | head -n 12; printf '\\e[32mok\\e[0m build finished in 2.1s\\n'");
      await page.keyboard.press('Enter');
      await page.evaluate(async () => {
        const c = globalThis.muxd.client;
        const start = (command) => c.call('process.start', { command }).catch(() => null);
        await start('for i in $(seq 1 40); do echo "GET /api/items/$i 200 $((i*3))ms"; sleep 0.01; done; echo "warning: slow query" >&2');
        await start('sleep 3600');
        await start('false');
      });
      await page.fill('#exec-form input[name=command]', 'uname -sm; echo "disk almost full" >&2; exit 1');
      await page.press('#exec-form input[name=command]', 'Enter');
    }
    await page.waitForTimeout(1500);
    if (s.side) await page.click('.view-btn[data-view=side]');
    await page.waitForTimeout(300);
    const path = join(out, `${s.name}.png`);
    await page.screenshot({ path });
    console.log(path);
    if (s.docs) {
      await page.screenshot({ path: join(root, 'docs', 'screenshot.png') });
      console.log(join(root, 'docs', 'screenshot.png'));
    }
    await ctx.close();
  }
} finally {
  await browser.close();
  await d.stop();
}
