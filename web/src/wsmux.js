// wsmux.js — a client of wsmux/1 (PROTOCOL.md) for the browser and Node 20+.
//
// One Client holds one WebSocket at a time and reconnects with backoff.
// Resources (terminals, processes, sessions) outlive the socket; channels do
// not: when the socket drops every channel closes with reason
// "disconnected", and the code that opened it reattaches from its offsets
// on the next "hello" event.
//
//   const c = new Client({ url: 'ws://127.0.0.1:3000/ws' });
//   c.on('state', (s) => ...);          // connecting | open | reconnecting | closed
//   c.on('hello', (hello, info) => ...); // after every handshake
//   c.on('notify', (method, params) => ...);
//   c.start();
//   const r = await c.call('exec', { command: 'echo hi' });
//   const ch = await c.open('process', { id }, { onData, onCtrl, onEof, onClose });
//
// In Node 20 pass `WebSocket` (globalThis.WebSocket exists with
// --experimental-websocket, or use the `ws` package).

import { T, encode, decode, json, u32, readU32 } from './frame.js';

export { T } from './frame.js';

/** The wsmux/1 WebSocket subprotocol. */
export const SUBPROTOCOL = 'wsmux.v1';

/** Default credit granted to the server per channel (bytes). */
export const DEFAULT_WINDOW = 256 * 1024;

const MAX_CREDIT = 0x7fffffff;

/**
 * RpcError is a failed RPC, OPEN or a call abandoned by a dropped socket.
 * `reason` is the protocol's reason string (not_found, cancelled, …) or
 * "disconnected".
 */
export class RpcError extends Error {
  constructor(message, { code = 0, reason = '', data } = {}) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.reason = reason;
    this.data = data;
  }
}

/** Emitter is a minimal on/off/emit event hub. */
class Emitter {
  #handlers = new Map();

  /** on registers fn for event and returns a function that removes it. */
  on(event, fn) {
    if (!this.#handlers.has(event)) this.#handlers.set(event, new Set());
    this.#handlers.get(event).add(fn);
    return () => this.off(event, fn);
  }

  off(event, fn) {
    this.#handlers.get(event)?.delete(fn);
  }

  emit(event, ...args) {
    for (const fn of [...(this.#handlers.get(event) ?? [])]) {
      try {
        fn(...args);
      } catch (err) {
        // A faulty listener must not break the read loop.
        console.error(`wsmux: ${event} listener:`, err);
      }
    }
  }
}

/**
 * Channel is one wsmux/1 data channel. Received DATA must be handed back
 * with consume(n) once its sink processed it; that returns credit to the
 * server (batched), which is how backpressure reaches the producer.
 */
export class Channel {
  constructor(conn, id, kind, window, handlers) {
    this.conn = conn;
    this.id = id;
    this.kind = kind;
    this.window = window;
    this.meta = null;
    this.closed = false;
    this.closeInfo = null;
    this.handlers = handlers;
    this.sendCredit = 0;
    this.sendQueue = []; // Uint8Array chunks waiting for credit
    this.eofQueued = false;
    this.eofSent = false;
    this.toReturn = 0; // consumed bytes not yet returned with WINDOW
    this.received = 0; // DATA bytes received in all
  }

  /** write sends bytes (Uint8Array or string), queued while credit lacks. */
  write(data) {
    if (this.closed || this.eofQueued) return false;
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    if (bytes.length === 0) return true;
    this.sendQueue.push(bytes);
    this.#flush();
    return true;
  }

  /** ctrl sends a CTRL op ({op:'resize',…}); it is not subject to credit. */
  ctrl(op) {
    if (this.closed) return;
    this.conn.send(T.CTRL, this.id, op);
  }

  /** eof says no more DATA will be sent (after what is queued). */
  eof() {
    if (this.closed || this.eofQueued) return;
    this.eofQueued = true;
    this.#flush();
  }

  /** consume returns credit for n received bytes the sink has processed. */
  consume(n) {
    if (this.closed || n <= 0) return;
    this.toReturn += n;
    // Batch: a quarter window keeps at least 3/4 of the credit with the
    // server, so it never waits on our batching.
    if (this.toReturn >= Math.max(1, Math.floor(this.window / 4))) this.flushCredit();
  }

  /** flushCredit returns all consumed credit now. */
  flushCredit() {
    if (this.closed || this.toReturn <= 0) return;
    const n = Math.min(this.toReturn, MAX_CREDIT);
    this.toReturn -= n;
    this.conn.send(T.WINDOW, this.id, u32(n));
  }

  /** close ends the channel (detaches; the resource lives on). */
  close(info) {
    if (this.closed) return;
    this.conn.send(T.CLOSE, this.id, info ?? null);
    this.conn.channelClosed(this, { reason: 'local', ...(info ?? {}) });
  }

  addCredit(n) {
    this.sendCredit = Math.min(MAX_CREDIT, this.sendCredit + n);
    this.#flush();
  }

  #flush() {
    if (this.meta === null) return; // not open yet: OPEN_OK brings credit
    const max = this.conn.limits.maxFrame || 32 * 1024;
    while (this.sendQueue.length > 0 && this.sendCredit > 0 && !this.closed) {
      const head = this.sendQueue[0];
      const n = Math.min(head.length, this.sendCredit, max);
      this.conn.send(T.DATA, this.id, head.subarray(0, n));
      this.sendCredit -= n;
      if (n === head.length) this.sendQueue.shift();
      else this.sendQueue[0] = head.subarray(n);
    }
    if (this.eofQueued && this.sendQueue.length === 0 && !this.closed && !this.eofSent) {
      this.eofSent = true;
      this.conn.send(T.EOF, this.id, null);
    }
  }
}

/**
 * Conn is one WebSocket's worth of protocol state: RPCs in flight and
 * channels. A Client makes a new Conn for each socket.
 */
class Conn {
  constructor(client, ws) {
    this.client = client;
    this.ws = ws;
    this.limits = {};
    this.hello = null;
    this.nextChannel = 1;
    this.channels = new Map();
    this.opening = new Map(); // id -> {resolve, reject, channel}
    this.nextRpc = 1;
    this.pending = new Map(); // rpc id -> {resolve, reject}
    this.pings = new Map(); // ping key -> {resolve, t0}
    this.dead = false;
    this.lastRecv = Date.now();
  }

  send(type, channel, payload) {
    if (this.dead) return;
    try {
      this.ws.send(encode(type, channel, payload));
    } catch {
      // The socket is closing; its close event ends this Conn.
    }
  }

  channelClosed(ch, info) {
    if (ch.closed) return;
    ch.closed = true;
    ch.closeInfo = info;
    this.channels.delete(ch.id);
    const op = this.opening.get(ch.id);
    if (op) {
      this.opening.delete(ch.id);
      op.reject(new RpcError(info.message || info.reason || 'channel closed', info));
      return; // it never opened: its onClose does not fire
    }
    ch.handlers.onClose?.(info, ch);
  }

  onMessage(data) {
    this.lastRecv = Date.now();
    if (typeof data === 'string') return; // wsmux/1 is binary only
    let f;
    try {
      f = decode(data);
    } catch {
      return;
    }
    switch (f.type) {
      case T.HELLO:
        this.hello = json(f.payload);
        this.limits = this.hello?.limits ?? {};
        this.client.onHello(this);
        return;
      case T.RPC:
        return this.onRpc(json(f.payload));
      case T.PONG:
        return this.onPong(f.payload);
      case T.GOAWAY:
        this.client.emit('goaway', json(f.payload));
        return;
      default:
        return this.onChannelFrame(f);
    }
  }

  onRpc(msg) {
    if (!msg) return;
    if (msg.id === undefined || msg.id === null) {
      if (msg.method) this.client.emit('notify', msg.method, msg.params ?? {});
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return; // cancelled or unknown
    this.pending.delete(msg.id);
    if (msg.error) {
      const e = msg.error;
      p.reject(new RpcError(e.message, { code: e.code, reason: e.data?.reason ?? '', data: e.data }));
    } else {
      p.resolve(msg.result);
    }
  }

  onPong(payload) {
    const key = Array.from(payload).join(',');
    const p = this.pings.get(key);
    if (!p) return;
    this.pings.delete(key);
    p.resolve(now() - p.t0);
  }

  onChannelFrame(f) {
    const id = f.channel;
    const ch = this.channels.get(id);
    if (!ch) return; // unknown or closed channel: dropped
    switch (f.type) {
      case T.OPEN_OK: {
        const ok = json(f.payload) ?? {};
        ch.meta = ok.meta ?? {};
        const op = this.opening.get(id);
        this.opening.delete(id);
        ch.addCredit(ok.window ?? 0);
        op?.resolve(ch);
        return;
      }
      case T.OPEN_FAIL: {
        const e = json(f.payload) ?? {};
        this.channelClosed(ch, { code: e.code, reason: e.reason, message: e.message });
        return;
      }
      case T.DATA:
        ch.received += f.payload.length;
        // A view, not a copy: each message has its own buffer, so the
        // handler may keep it.
        ch.handlers.onData?.(f.payload, ch);
        return;
      case T.WINDOW:
        ch.addCredit(readU32(f.payload));
        return;
      case T.CTRL:
        ch.handlers.onCtrl?.(json(f.payload) ?? {}, ch);
        return;
      case T.EOF:
        ch.handlers.onEof?.(ch);
        return;
      case T.CLOSE: {
        const info = json(f.payload) ?? {};
        this.channelClosed(ch, { reason: 'closed', ...info, remote: true });
        return;
      }
    }
  }

  /** drop ends this Conn: every call and channel fails with "disconnected". */
  drop(why) {
    if (this.dead) return;
    this.dead = true;
    const err = () => new RpcError(`connection lost: ${why}`, { reason: 'disconnected' });
    for (const p of this.pending.values()) p.reject(err());
    this.pending.clear();
    for (const p of this.pings.values()) p.reject(err());
    this.pings.clear();
    for (const ch of [...this.channels.values()]) {
      this.channelClosed(ch, { reason: 'disconnected', message: why });
    }
  }
}

// ABANDON_MS: reconnectNow replaces a dial older than this.
const ABANDON_MS = 2000;

function now() {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}

/**
 * Client is a reconnecting wsmux/1 client.
 *
 * Options:
 *  - url: string, or (async) function returning the URL for each attempt
 *    (the page adds ?token= there). A function may throw an Error with
 *    `fatal: true` to stop reconnecting (e.g. a token is needed).
 *  - WebSocket: the constructor (default globalThis.WebSocket).
 *  - name: the client name sent in HELLO.
 *  - reconnect: reconnect after a drop (default true).
 *  - backoffMs: [min, max] reconnect delay (default [250, 8000]); doubles
 *    per failed attempt, with jitter; resets after a handshake.
 *  - heartbeatMs: PING interval; a socket silent for two intervals after a
 *    PING is dropped and redialled (default 10000; 0 disables).
 *  - dialTimeoutMs: how long a dial may take to open and get the server's
 *    HELLO before it is given up and retried (default 10000): a network
 *    that swallows packets never fails a dial on its own.
 */
export class Client extends Emitter {
  constructor(opts = {}) {
    super();
    this.opts = {
      WebSocket: globalThis.WebSocket,
      name: 'muxd-web/1',
      reconnect: true,
      backoffMs: [250, 8000],
      heartbeatMs: 10000,
      dialTimeoutMs: 10000,
      ...opts,
    };
    if (!this.opts.WebSocket) throw new Error('wsmux: no WebSocket implementation (pass opts.WebSocket)');
    this.state = 'idle';
    this.conn = null;
    this.boot = null;
    this.attempt = 0;
    this.stopped = true;
    this.timer = null;
    this.hbTimer = null;
    this.waiters = [];
    this.lastError = null;
    this.dialing = false; // a dial is under way: resolving the URL or in its handshake
  }

  /** start connects (and keeps reconnecting until close()). */
  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.attempt = 0;
    this.#dial();
  }

  /** close stops reconnecting and closes the socket. */
  close() {
    this.stopped = true;
    this.dialing = false;
    clearTimeout(this.timer);
    clearInterval(this.hbTimer);
    const conn = this.conn;
    this.conn = null;
    if (conn) {
      clearTimeout(conn.dialTimer);
      conn.drop('closed by client');
      try {
        conn.ws.close(1000, 'bye');
      } catch {
        // Already closing.
      }
    }
    this.#setState('closed');
    for (const w of this.waiters.splice(0)) w.reject(new RpcError('client closed', { reason: 'disconnected' }));
  }

  /** reconnectNow skips the backoff wait (e.g. when the tab becomes visible). */
  reconnectNow() {
    if (this.stopped || this.state === 'open') return;
    if (this.dialing) {
      // A young dial is left to finish. One that has hung for a while
      // (a network that swallows packets) is closed and replaced: the
      // user asked to reconnect now. Never two sockets at once.
      const conn = this.conn;
      if (!conn || now() - conn.dialedAt < ABANDON_MS) return;
      this.#detach(conn, 'abandoned for a new attempt');
    }
    clearTimeout(this.timer);
    this.#dial();
  }

  /**
   * checkAlive pings now and drops the socket if no answer comes within
   * timeoutMs (after a laptop wakes, a socket can look open but be dead).
   */
  checkAlive(timeoutMs = 5000) {
    const conn = this.conn;
    if (!conn || this.state !== 'open') return;
    const timer = setTimeout(() => this.#lost(conn, `no reply to ping within ${timeoutMs} ms`), timeoutMs);
    this.#ping(conn).then(() => clearTimeout(timer), () => clearTimeout(timer));
  }

  /** drop closes the current socket abruptly, as a network failure would. */
  drop() {
    const conn = this.conn;
    if (conn) this.#lost(conn, 'dropped');
  }

  /** ready resolves with the HELLO once the client is connected. */
  ready({ signal } = {}) {
    if (this.state === 'open') return Promise.resolve(this.conn.hello);
    if (this.stopped) return Promise.reject(new RpcError('client not started', { reason: 'disconnected' }));
    return new Promise((resolve, reject) => {
      const w = { resolve, reject };
      this.waiters.push(w);
      signal?.addEventListener('abort', () => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(abortError(signal));
      });
    });
  }

  /** limits are the server's HELLO limits (empty before the first). */
  get limits() {
    return this.conn?.limits ?? {};
  }

  /**
   * call sends an RPC and resolves with its result. It waits for a
   * connection first. An aborted signal, or timeoutMs passing without an
   * answer, sends rpc.cancel and rejects (reason "cancelled" or "timeout").
   */
  async call(method, params = {}, { signal, timeoutMs } = {}) {
    if (signal?.aborted) throw abortError(signal);
    await this.ready({ signal });
    if (signal?.aborted) throw abortError(signal);
    const conn = this.conn;
    const id = conn.nextRpc++;
    return new Promise((resolve, reject) => {
      let timer = 0;
      const giveUp = (err) => {
        if (!conn.pending.delete(id)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        conn.send(T.RPC, 0, { jsonrpc: '2.0', id: conn.nextRpc++, method: 'rpc.cancel', params: { id } });
        reject(err);
      };
      const onAbort = () => giveUp(abortError(signal));
      const done = (fn) => (v) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        fn(v);
      };
      conn.pending.set(id, { resolve: done(resolve), reject: done(reject) });
      signal?.addEventListener('abort', onAbort);
      if (timeoutMs > 0) {
        timer = setTimeout(() => giveUp(new RpcError(`${method}: no answer within ${timeoutMs} ms`, { reason: 'timeout' })), timeoutMs);
      }
      conn.send(T.RPC, 0, { jsonrpc: '2.0', id, method, params });
    });
  }

  /**
   * open opens a channel on the current socket and resolves once the
   * server accepts it (ch.meta holds OPEN_OK's meta). handlers, each given
   * the channel last: onData(bytes, ch), onCtrl(op, ch), onEof(ch),
   * onClose(info, ch); window: credit to grant. A failed OPEN rejects with
   * an RpcError (reason not_found, gone, …) and calls no handler.
   */
  async open(kind, params, handlers = {}, { window = DEFAULT_WINDOW, signal } = {}) {
    await this.ready({ signal });
    const conn = this.conn;
    const id = conn.nextChannel;
    conn.nextChannel += 2;
    const ch = new Channel(conn, id, kind, window, handlers);
    conn.channels.set(id, ch);
    const opened = new Promise((resolve, reject) => conn.opening.set(id, { resolve, reject }));
    conn.send(T.OPEN, id, { kind, window, params });
    return opened;
  }

  /** ping measures one round trip on the socket, in milliseconds. */
  ping() {
    const conn = this.conn;
    if (!conn || this.state !== 'open') return Promise.reject(new RpcError('not connected', { reason: 'disconnected' }));
    return this.#ping(conn);
  }

  #ping(conn) {
    const key = new Uint8Array(8);
    const v = new DataView(key.buffer);
    v.setUint32(0, conn.nextRpc++);
    v.setUint32(4, (Math.random() * 0xffffffff) >>> 0);
    return new Promise((resolve, reject) => {
      conn.pings.set(Array.from(key).join(','), { resolve, reject, t0: now() });
      conn.send(T.PING, 0, key);
    });
  }

  async #dial() {
    if (this.stopped) return;
    this.dialing = true;
    this.#setState(this.attempt === 0 && !this.boot ? 'connecting' : 'reconnecting');
    let url;
    try {
      url = typeof this.opts.url === 'function' ? await this.opts.url() : this.opts.url;
    } catch (err) {
      this.lastError = err;
      if (err?.fatal) {
        this.stopped = true;
        this.#setState('closed');
        this.emit('error', err);
        return;
      }
      this.#retry();
      return;
    }
    if (this.stopped) return;
    let ws;
    try {
      ws = new this.opts.WebSocket(url, SUBPROTOCOL);
    } catch (err) {
      this.lastError = err;
      this.#retry();
      return;
    }
    ws.binaryType = 'arraybuffer';
    const conn = new Conn(this, ws);
    this.conn = conn;
    conn.dialedAt = now();
    if (this.opts.dialTimeoutMs > 0) {
      const ms = this.opts.dialTimeoutMs;
      conn.dialTimer = setTimeout(() => this.#lost(conn, `no answer from the server within ${ms / 1000} s`), ms);
    }
    ws.onopen = () => {
      conn.send(T.HELLO, 0, { v: 1, client: this.opts.name });
    };
    ws.onmessage = (ev) => conn.onMessage(ev.data);
    ws.onerror = () => {};
    ws.onclose = (ev) => this.#lost(conn, `socket closed (${ev.code}${ev.reason ? ' ' + ev.reason : ''})`);
  }

  onHello(conn) {
    if (conn !== this.conn) return;
    const hello = conn.hello ?? {};
    clearTimeout(conn.dialTimer);
    this.dialing = false;
    const bootChanged = this.boot !== null && hello.boot !== this.boot;
    const first = this.boot === null;
    this.boot = hello.boot;
    this.attempt = 0;
    this.#setState('open');
    this.#startHeartbeat(conn);
    for (const w of this.waiters.splice(0)) w.resolve(hello);
    this.emit('hello', hello, { first, bootChanged });
  }

  #startHeartbeat(conn) {
    clearInterval(this.hbTimer);
    const hb = this.opts.heartbeatMs;
    if (!hb) return;
    let sentAt = 0;
    this.hbTimer = setInterval(() => {
      if (conn.dead) return clearInterval(this.hbTimer);
      const t = Date.now();
      if (sentAt && conn.lastRecv < sentAt && t - sentAt > 2 * hb) {
        this.#lost(conn, 'no reply to ping');
        return;
      }
      if (!sentAt || conn.lastRecv >= sentAt) {
        sentAt = t;
        this.#ping(conn).catch(() => {});
      }
    }, hb);
  }

  #lost(conn, why) {
    if (conn !== this.conn) return;
    const wasOpen = this.#detach(conn, why);
    this.lastError = new Error(why);
    if (wasOpen) this.emit('lost', why);
    this.#retry();
  }

  // detach closes conn, the current socket, and fails what waits on it;
  // it reports whether the socket had been open (its HELLO came).
  #detach(conn, why) {
    this.conn = null;
    clearInterval(this.hbTimer);
    clearTimeout(conn.dialTimer);
    conn.ws.onclose = conn.ws.onmessage = conn.ws.onopen = null;
    try {
      conn.ws.close();
    } catch {
      // Best effort.
    }
    conn.drop(why);
    return conn.hello !== null;
  }

  #retry() {
    this.dialing = false;
    if (this.stopped || !this.opts.reconnect) {
      this.stopped = true;
      this.#setState('closed');
      for (const w of this.waiters.splice(0)) w.reject(new RpcError('disconnected', { reason: 'disconnected' }));
      return;
    }
    const [min, max] = this.opts.backoffMs;
    const base = Math.min(max, min * 2 ** this.attempt);
    const delay = base / 2 + Math.random() * (base / 2);
    this.attempt++;
    this.#setState('reconnecting');
    this.nextRetryAt = Date.now() + delay;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.#dial(), delay);
  }

  #setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.emit('state', s);
  }
}

// abortError is what an aborted call rejects with: reason "cancelled",
// like a call the server cancelled.
function abortError(signal) {
  const err = new RpcError('cancelled', { reason: 'cancelled' });
  err.cause = signal?.reason;
  return err;
}
