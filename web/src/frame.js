// wsmux/1 frame codec: a 6-byte header (type, flags, channel uint32 BE)
// followed by the payload. See PROTOCOL.md.

/** Frame type codes. */
export const T = Object.freeze({
  HELLO: 0x00,
  OPEN: 0x01,
  OPEN_OK: 0x02,
  OPEN_FAIL: 0x03,
  DATA: 0x04,
  WINDOW: 0x05,
  EOF: 0x06,
  CLOSE: 0x07,
  CTRL: 0x08,
  RPC: 0x09,
  PING: 0x0a,
  PONG: 0x0b,
  GOAWAY: 0x0c,
});

export const HEADER = 6;

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * encode builds one frame. payload is a Uint8Array, a string (UTF-8) or an
 * object (JSON); null means empty.
 */
export function encode(type, channel, payload) {
  let body;
  if (payload == null) body = new Uint8Array(0);
  else if (payload instanceof Uint8Array) body = payload;
  else if (typeof payload === 'string') body = enc.encode(payload);
  else body = enc.encode(JSON.stringify(payload));
  const out = new Uint8Array(HEADER + body.length);
  out[0] = type;
  out[1] = 0;
  new DataView(out.buffer).setUint32(2, channel >>> 0);
  out.set(body, HEADER);
  return out;
}

/** decode splits a received message; payload is a view, not a copy. */
export function decode(buf) {
  const u8 = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  if (u8.length < HEADER) throw new Error('wsmux: short frame');
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.length);
  return { type: u8[0], flags: u8[1], channel: dv.getUint32(2), payload: u8.subarray(HEADER) };
}

/** json parses a JSON payload; an empty payload is null. */
export function json(payload) {
  if (!payload || payload.length === 0) return null;
  return JSON.parse(dec.decode(payload));
}

/** u32 encodes a WINDOW increment. */
export function u32(n) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0);
  return b;
}

/** readU32 decodes a WINDOW increment. */
export function readU32(payload) {
  if (payload.length !== 4) return 0;
  return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
}
