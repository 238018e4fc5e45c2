// browser.mjs — Debian's headless Chromium driven by playwright-core.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';

/** CHROMIUM is the browser binary (CHROMIUM_BIN, else Debian's). */
export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

/** haveChromium tells whether the browser tests can run here. */
export const haveChromium = existsSync(CHROMIUM);

/** launch starts a fresh headless Chromium (its own temporary profile). */
export function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-dev-shm-usage',
    ],
  });
}
