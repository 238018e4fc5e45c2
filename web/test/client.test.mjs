// Tests of the wsmux/1 JS client against the real muxd binary.
// Node 20 needs --experimental-websocket (Node 22+ has WebSocket built in).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { Client, RpcError } from '../src/wsmux.js';
import { startDaemon, until, withTimeout } from '../testlib/daemon.mjs';

if (typeof WebSocket !== 'function') {
  throw new Error('no global WebSocket: run node with --experimental-websocket (Node 20) or use Node 22+');
}

const dec = new TextDecoder();

// connect starts a client and waits for its first handshake.
async function connect(d, opts = {}) {
  const c = new Client({ url: d.wsUrl, name: 'web-test/1', backoffMs: [20, 200], ...opts });
  c.start();
  await withTimeout(c.ready(), 5000, 'handshake');
  return c;
}

// collect opens a terminal channel that records its output as text.
async function attachTerminal(c, params, { consume = true, window } = {}) {
  const got = { text: '', bytes: 0, ctrl: [], closed: null };
  const ch = await c.open('terminal', params, {
    onData: (b, ch) => {
      got.bytes += b.length;
      got.text += dec.decode(b, { stream: true });
      if (consume) ch.consume(b.length);
    },
    onCtrl: (op) => got.ctrl.push(op),
    onClose: (info) => (got.closed = info),
  }, window ? { window } : {});
  got.ch = ch;
  // bash may drop what is typed before its first prompt.
  await until(() => /[$#>] $/.test(got.text), 20000, `the shell prompt (got ${JSON.stringify(got.text)})`);
  return got;
}

describe('wsmux client against muxd', () => {
  let d;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d?.stop();
    // No stray daemon: the pid is gone once stop() returns.
    assert.throws(() => process.kill(d.pid, 0), { code: 'ESRCH' });
  });

  test('HELLO carries boot and limits', async () => {
    const c = await connect(d);
    try {
      const hello = await c.ready();
      assert.equal(hello.v, 1);
      assert.match(hello.boot, /\S/);
      assert.ok(hello.limits.maxFrame >= 1024, `maxFrame ${hello.limits.maxFrame}`);
      const info = await c.call('server.info');
      assert.equal(info.boot, hello.boot);
    } finally {
      c.close();
    }
  });

  test('RPC errors carry the protocol reason', async () => {
    const c = await connect(d);
    try {
      const cases = [
        { method: 'no.such.method', params: {}, reason: 'method_not_found' },
        { method: 'terminal.destroy', params: { id: 'does-not-exist' }, reason: 'not_found' },
      ];
      for (const tc of cases) {
        await assert.rejects(c.call(tc.method, tc.params), (err) => {
          assert.ok(err instanceof RpcError, `${tc.method}: ${err}`);
          assert.equal(err.reason, tc.reason, `${tc.method}: got ${err.reason}, want ${tc.reason}`);
          return true;
        });
      }
    } finally {
      c.close();
    }
  });

  test('an aborted call rejects with "cancelled" and cancels it on the server', async (t) => {
    const c = await connect(d);
    try {
      const ac = new AbortController();
      const id = `abort-${Date.now()}`;
      const p = c.call('exec', { id, command: 'sleep 30' }, { signal: ac.signal });
      // Abort once the command runs (the exec is a process reachable by id).
      const running = await until(
        () => c.call('process.get', { id }).then((r) => r.status === 'running', (e) => (e.reason === 'method_not_found' ? 'no-exec' : false)),
        5000, 'the exec to run');
      if (running === 'no-exec') return t.skip('exec not in this build yet');
      ac.abort();
      await assert.rejects(withTimeout(p, 2000, 'abort'), (e) => e.reason === 'cancelled');
      const ended = await until(async () => {
        const r = await c.call('process.get', { id });
        return r.status !== 'running' && r;
      }, 5000, 'the cancelled exec to end');
      assert.equal(ended.exitCode, null, `a cancelled exec is killed: ${JSON.stringify(ended)}`);
      // The connection stays usable.
      assert.ok((await c.call('server.info')).boot);
    } finally {
      c.close();
    }
  });

  test('a call with timeoutMs rejects with "timeout" when no answer comes', async (t) => {
    const c = await connect(d);
    try {
      const t0 = Date.now();
      const err = await c.call('exec', { command: 'sleep 5' }, { timeoutMs: 200 }).then(() => null, (e) => e);
      if (err?.reason === 'method_not_found') return t.skip('exec not in this build yet');
      assert.equal(err?.reason, 'timeout', `got ${err}`);
      assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
      assert.ok((await c.call('server.info', {}, { timeoutMs: 5000 })).boot);
    } finally {
      c.close();
    }
  });

  test('a terminal echoes typed input', async () => {
    const c = await connect(d);
    try {
      const t = await c.call('terminal.create', { cols: 100, rows: 30 });
      const got = await attachTerminal(c, { id: t.id });
      assert.equal(got.ch.meta.instance, t.instance);
      got.ch.write('echo web-$((6*7))\n');
      await until(() => got.text.includes('web-42'), 5000, 'web-42 in the terminal');
      got.ch.ctrl({ op: 'resize', cols: 91, rows: 17 });
      got.ch.write('stty size\n');
      await until(() => got.text.includes('17 91'), 5000, 'stty size 17 91');
      await c.call('terminal.destroy', { id: t.id });
      await until(() => got.closed || got.ctrl.some((o) => o.op === 'exit'), 5000, 'exit after destroy');
    } finally {
      c.close();
    }
  });

  test('the server never sends beyond the credit granted', async () => {
    const c = await connect(d);
    try {
      const t = await c.call('terminal.create', {});
      const window = 1024;
      const got = await attachTerminal(c, { id: t.id }, { consume: false, window });
      got.ch.write('head -c 300000 /dev/zero | tr "\\0" x; echo; echo END-OF-FLOOD\n');
      await until(() => got.bytes >= window, 5000, 'the first window');
      // Credit is exhausted: the server must stop. A ping round trip
      // proves everything it had sent before has arrived.
      await c.ping();
      await c.ping();
      assert.ok(got.bytes <= window, `received ${got.bytes} bytes on a ${window}-byte window`);
      // Returning credit lets it go on until the end.
      const consumeAll = setInterval(() => {
        got.ch.consume(got.bytes - (got.returned ?? 0));
        got.ch.flushCredit();
        got.returned = got.bytes;
      }, 5);
      try {
        await until(() => got.text.includes('END-OF-FLOOD\r\n'), 10000, 'the flood to finish');
      } finally {
        clearInterval(consumeAll);
      }
      await c.call('terminal.destroy', { id: t.id });
    } finally {
      c.close();
    }
  });

  test('after a dropped socket the client reconnects and a terminal resumes without duplicates', async () => {
    const c = await connect(d);
    try {
      const t = await c.call('terminal.create', {});
      let offset = null;
      let text = '';
      const open = async () => {
        const params = { id: t.id, instance: t.instance };
        if (offset !== null) params.from = offset;
        const ch = await c.open('terminal', params, {
          onData: (b, ch) => {
            if (offset !== null) offset += b.length;
            text += dec.decode(b);
            ch.consume(b.length);
          },
          onCtrl: (op) => {
            if (op.op === 'sync') offset = op.offset;
          },
        });
        if (offset === null) offset = ch.meta.first;
        return ch;
      };
      let ch = await open();
      await until(() => /[$#>] $/.test(text), 20000, 'the shell prompt');
      const lost = new Promise((r) => c.on('lost', r));
      ch.write('for i in 1 2 3; do echo line-$i-mark; done\n');
      await until(() => text.includes('line-3-mark'), 5000, 'first batch');
      await until(async () => (await c.ping()) >= 0 && offset > 0, 2000, 'sync offset');
      const rehello = new Promise((r) => c.on('hello', (h, info) => r(info)));
      await d.drop();
      await withTimeout(lost, 5000, 'drop noticed');
      const info = await withTimeout(rehello, 5000, 'reconnect');
      assert.equal(info.bootChanged, false);
      ch = await open();
      ch.write('echo after-$((40+2))\n');
      await until(() => text.includes('after-42'), 5000, 'output after reconnect');
      for (const i of [1, 2, 3]) {
        const n = text.split(`line-${i}-mark\r\n`).length - 1;
        assert.equal(n, 1, `line-${i}-mark printed ${n} times, want 1:\n${JSON.stringify(text)}`);
      }
      await c.call('terminal.destroy', { id: t.id });
    } finally {
      c.close();
    }
  });

  test('reconnectNow while a dial is under way opens no second socket', async () => {
    const made = [];
    class Counting extends WebSocket {
      constructor(...args) {
        super(...args);
        made.push(this);
      }
    }
    // A long backoff: only reconnectNow dials again.
    const c = await connect(d, { WebSocket: Counting, backoffMs: [60000, 60000] });
    try {
      const lost = new Promise((r) => c.on('lost', r));
      c.drop();
      await withTimeout(lost, 5000, 'drop noticed');
      const rehello = new Promise((r) => c.on('hello', r));
      c.reconnectNow();
      c.reconnectNow(); // the dial above is still in its handshake
      await withTimeout(rehello, 5000, 'reconnect');
      c.reconnectNow(); // open: nothing to do
      assert.equal(made.length, 2, `sockets made: ${made.length}, want the first and one redial`);
      assert.equal(made[1].readyState, WebSocket.OPEN);
    } finally {
      c.close();
    }
  });

  test('a dial that gets no answer is given up and retried; reconnectNow replaces a hung one', async () => {
    // A server that takes the TCP connection and never answers: a
    // network that swallows packets, or a stuck proxy.
    const holes = [];
    const blackHole = async () => {
      const socks = [];
      const srv = createServer((sock) => socks.push(sock));
      holes.push([srv, socks]);
      await new Promise((r) => srv.listen(0, '127.0.0.1', r));
      return [`ws://127.0.0.1:${srv.address().port}/ws`, socks];
    };
    try {
      const [url, socks] = await blackHole();
      const c = new Client({ url, name: 'web-test/1', backoffMs: [20, 50], dialTimeoutMs: 200 });
      c.start();
      try {
        await until(() => socks.length >= 3, 5000, 'three dials');
        assert.notEqual(c.state, 'open');
      } finally {
        c.close();
      }

      // Without a dial timeout and with a long backoff, only reconnectNow
      // dials again, and only once the dial is old enough.
      const [url2, socks2] = await blackHole();
      const c2 = new Client({ url: url2, name: 'web-test/1', backoffMs: [60000, 60000], dialTimeoutMs: 0 });
      c2.start();
      try {
        await until(() => socks2.length === 1, 5000, 'the first dial');
        c2.reconnectNow(); // young: left to finish
        await new Promise((r) => setTimeout(r, 2200));
        assert.equal(socks2.length, 1, 'a young dial was replaced');
        c2.reconnectNow();
        // (Node's WebSocket leaves the closed dial's TCP connection open
        // and may retry its handshake: only that a new dial came is
        // checked, not how many connections the hole sees.)
        await until(() => socks2.length >= 2, 5000, 'the new dial');
      } finally {
        c2.close();
      }
    } finally {
      for (const [srv, socks] of holes) {
        for (const s of socks) s.destroy();
        await new Promise((r) => srv.close(r));
      }
    }
  });

  test('checkAlive keeps a live socket and the heartbeat is cleared on close', async () => {
    const c = await connect(d, { heartbeatMs: 50 });
    const lost = [];
    c.on('lost', (why) => lost.push(why));
    c.checkAlive(2000);
    // Several heartbeat periods and a ping round trip later, still open.
    for (let i = 0; i < 5; i++) await c.ping();
    await new Promise((r) => setTimeout(r, 200)); // heartbeats run (not a synchronization)
    assert.equal(c.state, 'open');
    assert.deepEqual(lost, []);
    c.close();
    assert.equal(c.state, 'closed');
  });

  test('pending calls fail with "disconnected" when the socket drops', async () => {
    const c = await connect(d, { reconnect: false });
    const states = [];
    c.on('state', (s) => states.push(s));
    // A call sent right before the drop either answers or is abandoned.
    const p = c.call('terminal.list').catch((e) => e);
    await d.drop();
    const r = await withTimeout(p, 5000, 'pending call');
    if (r instanceof Error) assert.equal(r.reason, 'disconnected');
    await until(() => c.state === 'closed', 5000, 'closed state');
    await assert.rejects(c.call('server.info'), (e) => e.reason === 'disconnected');
  });

  test('process output streams with stdout and stderr apart, and resumes exactly', async (t) => {
    const c = await connect(d);
    try {
      let p;
      try {
        p = await c.call('process.start', { command: 'for i in $(seq 1 2000); do echo out-$i; echo err-$i >&2; done' });
      } catch (err) {
        if (err.reason === 'method_not_found') return t.skip('process.start not in this build yet');
        throw err;
      }
      const next = { 1: 0, 2: 0 };
      const text = { 1: '', 2: '' };
      let exit = null;
      let drops = 0;
      const open = () =>
        c.open('process', { id: p.id, instance: p.instance, stdout: next[1], stderr: next[2] }, {
          onData: (b, ch) => {
            next[b[0]] += b.length - 1;
            text[b[0]] += dec.decode(b.subarray(1));
            ch.consume(b.length);
            // Detach once mid-stream and resume from the offsets.
            if (drops === 0 && next[1] > 5000) {
              drops++;
              ch.close();
              open();
            }
          },
          onCtrl: (op) => {
            if (op.op === 'exit') exit = op;
          },
        });
      await open();
      await until(() => exit, 10000, 'exit');
      assert.equal(exit.code, 0);
      const want = (s) => Array.from({ length: 2000 }, (_, i) => `${s}-${i + 1}\n`).join('');
      assert.equal(text[1], want('out'));
      assert.equal(text[2], want('err'));
      assert.equal(exit.stdoutBytes, next[1]);
    } finally {
      c.close();
    }
  });
});
