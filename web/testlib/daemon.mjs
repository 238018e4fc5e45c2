// daemon.mjs — starts the real muxd binary for tests on a free loopback
// port with a fresh data dir, and stops it by pid.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../../..');

/** BIN is the binary under test (MUXD_BIN, else bin/muxd). */
export const BIN = resolve(root, process.env.MUXD_BIN || 'bin/muxd');

/** freePort asks the kernel for an unused loopback port. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/**
 * startDaemon runs `muxd serve` and resolves once /healthz answers.
 * opts.env adds environment (MUXD_TOKEN, MUXD_TEST_HOOKS), opts.port
 * reuses a port (a restarted daemon); returns
 * {url, wsUrl, port, pid, log(), stop()}.
 */
export async function startDaemon({ env = {}, args = [], port: wantPort } = {}) {
  const dataDir = await mkdtemp(join(tmpdir(), 'muxd-webtest-'));
  // Shells get a fresh HOME: the machine's ~/.bashrc is not ours to run (a
  // stale lock in one once hung every shell's startup).
  const home = join(dataDir, 'home');
  await mkdir(home);
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = wantPort ?? (await freePort());
    const child = spawn(BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', join(dataDir, 'data'), ...args], {
      env: { ...process.env, HOME: home, MUXD_TEST_HOOKS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    const exited = new Promise((r) => child.on('exit', (code, sig) => r({ code, sig })));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 10000;
    let up = false;
    while (Date.now() < deadline) {
      const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 50))]);
      if (gone) break;
      try {
        const r = await fetch(`${url}/healthz`);
        if (r.ok) {
          up = true;
          break;
        }
      } catch {
        // not listening yet
      }
    }
    if (!up) {
      lastErr = new Error(`muxd did not start: ${log}`);
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      continue;
    }
    return {
      url,
      wsUrl: `ws://127.0.0.1:${port}/ws`,
      port,
      pid: child.pid,
      log: () => log,
      async drop() {
        const r = await fetch(`${url}/_test/drop`, { method: 'POST' });
        if (!r.ok) throw new Error(`/_test/drop: ${r.status}`);
      },
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          process.kill(child.pid, 'SIGTERM');
          const t = setTimeout(() => child.exitCode === null && process.kill(child.pid, 'SIGKILL'), 6000);
          await exited;
          clearTimeout(t);
        }
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
  await rm(dataDir, { recursive: true, force: true });
  throw lastErr;
}

/** until polls fn (every 20 ms) until it returns truthy, or fails after ms. */
export async function until(fn, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** withTimeout rejects if p does not settle within ms. */
export function withTimeout(p, ms, what = 'operation') {
  let t;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`${what} did not finish within ${ms} ms`)), ms))),
  ]);
}
