// logview.js — follows one process's output in a bounded DOM view.
//
// Bytes go into a LogStore (the newest MAX_LINES lines); a render per
// animation frame appends what is new and trims the top. Credit is returned
// as soon as a payload is split into lines, which is cheap and bounded, so
// a 100 MB log streams at socket speed without freezing the tab. Earlier
// output is fetched on demand with process.read.

import { LogStore, splitText } from './lines.js';
import { el, fmtDuration, statusText } from './ui.js';
import { SHORT_MS } from './procs.js';

const MAX_LINES = 5000; // lines kept and drawn while following
const MAX_EARLIER_LINES = 20000; // lines "load earlier" may add above
const READ_CHUNK = 256 * 1024; // bytes per process.read
const RENDER_MS = 100; // minimum time between two renders
const WINDOW = 128 * 1024; // credit per process channel: bytes queued ahead of a keystroke echo

/** LogView shows process `proc` (a Process) in `pane`. */
export class LogView {
  constructor({ client, proc, pane, onChange = () => {} }) {
    this.client = client;
    this.id = proc.id;
    this.instance = proc.instance;
    this.proc = proc;
    this.pane = pane;
    this.onChange = onChange;
    this.store = new LogStore(MAX_LINES);
    this.ch = null;
    this.ended = false;
    this.gone = false;
    this.drawn = 0; // seq of the last line in the DOM
    this.follow = true;
    this.earlierLines = 0;
    this.frame = 0;

    this.head = el('div', { class: 'log-head' });
    this.earlierBtn = el('button', { type: 'button', class: 'btn small', title: 'Fetch output from before this view (process.read)' }, 'Load earlier');
    this.earlierBtn.addEventListener('click', () => this.loadEarlier());
    this.info = el('span', { class: 'log-info' });
    this.head.append(this.earlierBtn, this.info);
    this.body = el('div', { class: 'log-body', tabindex: '0', role: 'log', 'aria-label': `output of ${proc.command}` });
    this.earlier = el('div', { class: 'log-earlier' });
    this.live = el('div', { class: 'log-live' });
    this.body.append(this.earlier, this.live);
    this.jump = el('button', { type: 'button', class: 'btn jump', hidden: '' }, 'New output — jump to end ↓');
    this.jump.addEventListener('click', () => this.scrollToEnd());
    this.status = el('div', { class: 'log-status', role: 'status' });
    pane.append(this.head, this.body, this.jump, this.status);
    // Following stops only when the reader scrolls up (wheel, touch, keys,
    // scrollbar), not when trimming or redrawing moves the scroll position.
    const intent = () => (this.userScrollAt = performance.now());
    for (const ev of ['wheel', 'touchmove', 'keydown', 'pointerdown']) this.body.addEventListener(ev, intent, { passive: true });
    this.body.addEventListener('scroll', () => {
      const atEnd = this.body.scrollHeight - this.body.scrollTop - this.body.clientHeight < 24;
      if (atEnd && !this.follow) {
        this.follow = true;
        this.#schedule();
      } else if (!atEnd && this.follow && performance.now() - (this.userScrollAt ?? -1e9) < 1000) {
        this.follow = false;
      }
    });
    this.#updateInfo();
  }

  /** attach opens (or reopens) the process channel from the next offsets. */
  async attach() {
    if (this.gone || this.attaching || (this.ended && this.eof)) return;
    this.attaching = true;
    const params = { id: this.id, stdout: this.store.next.stdout, stderr: this.store.next.stderr, follow: true };
    if (this.instance) params.instance = this.instance;
    try {
      const ch = await this.client.open('process', params, {
        onData: (b, c) => this.#data(c, b),
        onCtrl: (op) => this.#ctrl(op),
        onEof: (c) => {
          this.eof = true;
          this.store.flush();
          this.#schedule();
          c.close();
        },
        onClose: (info, c) => {
          if (this.ch === c) this.ch = null;
          this.#updateInfo();
        },
      }, { window: WINDOW });
      this.ch = ch;
      this.instance = ch.meta.instance || this.instance;
    } catch (err) {
      if (err.reason === 'not_found' || err.reason === 'gone') {
        this.gone = true;
        this.store.note(err.reason === 'gone' ? '[this process id now names another process]' : '[process no longer exists]');
        this.#schedule();
      }
    } finally {
      this.attaching = false;
      this.#updateInfo();
    }
  }

  #data(ch, b) {
    if (b.length < 1) return;
    this.store.push(b[0] === 2 ? 'stderr' : 'stdout', b.subarray(1));
    ch.consume(b.length);
    if (!this.pane.hidden) this.#schedule();
  }

  #ctrl(op) {
    if (op.op === 'gap') {
      this.store.note(`[… ${op.bytes} bytes of ${op.stream} were not kept …]`);
      this.store.next[op.stream] = (this.store.next[op.stream] ?? 0) + op.bytes;
    } else if (op.op === 'exit') {
      this.ended = true;
      this.store.flush();
      Object.assign(this.proc, { status: op.status, exitCode: op.code, signal: op.signal });
      this.store.note(`[${statusText(this.proc)}]`, 'exit');
    }
    this.#schedule();
    this.onChange(this);
  }

  /** update takes a fresher Process record (from the list). */
  update(proc) {
    Object.assign(this.proc, proc);
    this.#updateInfo();
  }

  #schedule() {
    if (this.frame) return;
    // At most one render per RENDER_MS: a log does not need 60 fps, and
    // the main thread stays free for keystrokes. rAF does not run in hidden
    // tabs; the store is bounded, so waiting is fine.
    const wait = Math.max(0, (this.lastRender ?? 0) + RENDER_MS - performance.now());
    this.frame = setTimeout(() => {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.lastRender = performance.now();
        this.render();
      });
    }, wait);
  }

  /**
   * render draws lines added since the last render, while following and
   * shown. Consecutive lines of one stream share one element (a flood is a
   * few nodes per frame, not thousands), and the oldest elements go once
   * more than MAX_LINES lines are drawn.
   */
  render() {
    this.#updateInfo();
    if (this.pane.hidden) return; // drawn when shown (see show())
    if (!this.follow) {
      this.jump.hidden = this.store.seq === this.drawn;
      return;
    }
    const fresh = this.store.since(this.drawn);
    if (fresh.length === 0) return;
    if (fresh.length >= MAX_LINES || fresh[0].seq !== this.drawn + 1) {
      // Fell behind by more than a view: redraw the view.
      this.live.replaceChildren();
      this.liveLines = 0;
    }
    let i = Math.max(0, fresh.length - MAX_LINES);
    const frag = document.createDocumentFragment();
    while (i < fresh.length) {
      const stream = fresh[i].stream;
      let j = i;
      const texts = [];
      while (j < fresh.length && fresh[j].stream === stream) texts.push(fresh[j++].text);
      const blk = lineEl(stream, texts.join('\n'));
      blk.dataset.n = String(texts.length);
      frag.append(blk);
      this.liveLines = (this.liveLines ?? 0) + texts.length;
      i = j;
    }
    this.live.append(frag);
    this.drawn = fresh[fresh.length - 1].seq;
    while (this.live.firstElementChild && this.liveLines - Number(this.live.firstElementChild.dataset.n) >= MAX_LINES) {
      this.liveLines -= Number(this.live.firstElementChild.dataset.n);
      this.live.firstElementChild.remove();
    }
    this.jump.hidden = true;
    this.body.scrollTop = this.body.scrollHeight;
  }

  /** show draws what arrived while the tab was hidden. */
  show() {
    this.#schedule();
  }

  scrollToEnd() {
    this.follow = true;
    this.body.scrollTop = this.body.scrollHeight;
    this.#schedule();
  }

  /** loadEarlier prepends up to READ_CHUNK bytes per stream from before the view. */
  async loadEarlier() {
    if (this.earlierLines >= MAX_EARLIER_LINES) {
      this.info.textContent = 'Earlier-output limit reached; use `muxd logs` for the whole log.';
      return;
    }
    this.earlierBtn.disabled = true;
    const top = {
      stdout: this.earlyTop?.stdout ?? this.store.earliest('stdout'),
      stderr: this.earlyTop?.stderr ?? this.store.earliest('stderr'),
    };
    const blocks = [];
    try {
      for (const stream of ['stdout', 'stderr']) {
        const to = top[stream];
        if (to <= 0) continue;
        const from = Math.max(0, to - READ_CHUNK);
        const r = await this.client.call('process.read', { id: this.id, stream, from, length: to - from }, { timeoutMs: SHORT_MS });
        // r.from > from: the bytes before r.from were not kept (retention).
        const start = Math.max(from, r.from ?? from);
        const lost = start > from || (r.first ?? 0) > from;
        top[stream] = lost ? 0 : start;
        blocks.push({ stream, from: start, to, lines: splitText(r.data ?? ''), lost });
      }
    } catch (err) {
      this.info.textContent = `Could not load earlier output: ${err.message}`;
      this.earlierBtn.disabled = false;
      return;
    }
    this.earlyTop = top;
    const frag = document.createDocumentFragment();
    for (const b of blocks) {
      if (b.lost) frag.append(lineEl('note', `[output of ${b.stream} before byte ${b.from} was not kept]`));
      frag.append(lineEl('note', `— ${b.stream}, bytes ${b.from}–${b.to} —`));
      if (b.lines.length > 0) frag.append(lineEl(b.stream, b.lines.join('\n')));
      this.earlierLines += b.lines.length;
    }
    const before = this.body.scrollHeight;
    this.earlier.prepend(frag);
    this.body.scrollTop += this.body.scrollHeight - before; // keep the reader's place
    this.#updateInfo();
  }

  #updateInfo() {
    const p = this.proc;
    const bytes = this.store.next.stdout + this.store.next.stderr;
    const state = this.ch ? (this.ended ? '' : 'following') : this.ended || this.gone ? '' : 'detached';
    this.status.textContent = `${statusText(p)} · ${fmtBytes(bytes)}${state ? ' · ' + state : ''}${
      p.startedAt ? ' · ' + fmtDuration(p) : ''
    }`;
    const top = this.earlyTop ?? { stdout: this.store.earliest('stdout'), stderr: this.store.earliest('stderr') };
    const before = top.stdout + top.stderr;
    this.earlierBtn.disabled = before <= 0;
    if (before > 0) this.info.textContent = `${fmtBytes(before)} of earlier output not shown`;
    else if (this.earlyTop) this.info.textContent = 'all retained output shown';
  }

  /** dispose detaches. The process is not touched. */
  dispose() {
    clearTimeout(this.frame);
    cancelAnimationFrame(this.frame);
    this.ch?.close();
    this.ch = null;
    this.gone = true;
  }
}

function lineEl(stream, text) {
  const d = document.createElement('div');
  d.className = stream === 'stderr' ? 'ln err' : stream === 'stdout' ? 'ln' : 'ln note';
  d.textContent = text || '\u200b';
  return d;
}

/** fmtBytes prints a byte count for people. */
export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
