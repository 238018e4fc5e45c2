// lines.js — turns process output bytes into display lines, keeping only
// the newest ones, so a 100 MB log costs a bounded amount of memory and DOM.
// Pure (no DOM): unit-tested in Node.

const NL = 0x0a;
/** A line longer than this is cut into pieces (a log with no newlines). */
export const MAX_LINE_BYTES = 16 * 1024;

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

const decoder = new TextDecoder('utf-8');

/** clean makes one line of output displayable: no escapes, last \r wins. */
export function clean(text) {
  let t = text.indexOf('\x1b') >= 0 ? text.replace(ANSI, '') : text;
  if (t.endsWith('\r')) t = t.slice(0, -1);
  const cr = t.lastIndexOf('\r');
  if (cr >= 0) t = t.slice(cr + 1); // a progress bar: show its final state
  return t;
}

/**
 * LogStore keeps the newest `max` lines of a process's stdout and stderr.
 * Each line is {seq, stream ('stdout'|'stderr'), off (its first byte's
 * offset in its stream), text}. push() takes DATA payloads as received.
 */
export class LogStore {
  constructor(max = 5000) {
    this.max = max;
    this.lines = []; // oldest first, at most max (+ a slack trimmed in bulk)
    this.seq = 0; // lines ever added
    this.next = { stdout: 0, stderr: 0 }; // bytes received per stream (offsets)
    this.partial = { stdout: null, stderr: null }; // {off, bytes: Uint8Array[]}
    this.partialLen = { stdout: 0, stderr: 0 };
  }

  /** start sets the offsets a (re)attached channel starts from. */
  start(stdout, stderr) {
    this.next.stdout = stdout;
    this.next.stderr = stderr;
  }

  /** push adds bytes of one stream (offset = this.next[stream]). */
  push(stream, bytes) {
    let start = 0;
    const base = this.next[stream];
    this.next[stream] += bytes.length;
    // Only the last `max` complete lines of a big chunk can survive: find
    // newlines from the end and skip what would be trimmed anyway.
    const ends = [];
    for (let i = bytes.lastIndexOf(NL); i >= 0 && ends.length <= this.max; i = i > 0 ? bytes.lastIndexOf(NL, i - 1) : -1) {
      ends.push(i);
    }
    ends.reverse();
    if (ends.length > this.max) {
      // Older lines in this chunk are dropped unseen; so is any partial.
      this.partial[stream] = null;
      this.partialLen[stream] = 0;
      start = ends[0] + 1;
      ends.shift();
    }
    if (ends.length > 0 && this.partial[stream]) {
      // The first line began in an earlier chunk.
      this.#append(stream, base + start, bytes.subarray(start, ends[0]));
      this.#emit(stream);
      start = ends.shift() + 1;
    }
    if (ends.length > 0) {
      // One decode and one split for all complete lines: a 0x0A byte is
      // never part of a multi-byte sequence, so the split lines up with
      // the newline offsets found above.
      const last = ends[ends.length - 1];
      const parts = decoder.decode(bytes.subarray(start, last)).split('\n');
      let off = base + start;
      for (let k = 0; k < parts.length; k++) {
        this.lines.push({ seq: ++this.seq, stream, off, text: clean(parts[k]) });
        off = base + ends[k] + 1;
      }
      start = last + 1;
    }
    if (start < bytes.length) this.#append(stream, base + start, bytes.subarray(start));
    // Bound a line with no end (a 100 MB single line).
    while (this.partialLen[stream] > MAX_LINE_BYTES) this.#emit(stream, MAX_LINE_BYTES);
    this.#trim();
  }

  /** flush emits unterminated lines (the process ended). */
  flush() {
    for (const s of ['stdout', 'stderr']) if (this.partialLen[s] > 0) this.#emit(s);
    this.#trim();
  }

  /** note adds a marker line (gap, exit) that belongs to no stream. */
  note(text, kind = 'note') {
    this.lines.push({ seq: ++this.seq, stream: kind, off: -1, text });
    this.#trim();
  }

  /** earliest is the offset of the oldest kept byte of stream. */
  earliest(stream) {
    for (const l of this.lines) if (l.stream === stream) return l.off;
    return this.partial[stream]?.off ?? this.next[stream];
  }

  #append(stream, off, bytes) {
    if (bytes.length === 0 && !this.partial[stream]) {
      this.partial[stream] = { off, bytes: [] };
      return;
    }
    if (!this.partial[stream]) this.partial[stream] = { off, bytes: [] };
    this.partial[stream].bytes.push(bytes.slice());
    this.partialLen[stream] += bytes.length;
  }

  // emit turns the partial line (or its first `limit` bytes) into a line.
  #emit(stream, limit = Infinity) {
    const p = this.partial[stream] ?? { off: this.next[stream], bytes: [] };
    let all = concat(p.bytes, this.partialLen[stream]);
    let rest = null;
    if (all.length > limit) {
      // Cut on a UTF-8 boundary.
      let cut = limit;
      while (cut > 0 && (all[cut] & 0xc0) === 0x80) cut--;
      rest = all.subarray(cut);
      all = all.subarray(0, cut);
    }
    this.lines.push({ seq: ++this.seq, stream, off: p.off, text: clean(decoder.decode(all)) });
    if (rest) {
      this.partial[stream] = { off: p.off + all.length, bytes: [rest] };
      this.partialLen[stream] = rest.length;
    } else {
      this.partial[stream] = null;
      this.partialLen[stream] = 0;
    }
  }

  #trim() {
    // Trim in bulk: splice cost is paid once per max/4 lines.
    if (this.lines.length > this.max + (this.max >> 2)) this.lines.splice(0, this.lines.length - this.max);
  }

  /** tail returns kept lines with seq > after (at most max). */
  since(after) {
    const out = [];
    for (let i = this.lines.length - 1; i >= 0 && this.lines[i].seq > after; i--) out.push(this.lines[i]);
    out.reverse();
    return out.length > this.max ? out.slice(out.length - this.max) : out;
  }
}

function concat(chunks, len) {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(len);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

/** splitText splits text fetched with process.read into display lines. */
export function splitText(text) {
  const parts = text.split('\n');
  if (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  return parts.map(clean);
}
