// termview.js — one muxd terminal drawn by xterm.js in a pane.
//
// Credit for terminal output is returned when xterm has processed the bytes
// (term.write's callback), so a slow renderer slows the PTY: end-to-end
// backpressure. While the page is hidden, credit is returned on receipt (a
// background tab must not throttle a build) until HIDDEN_BACKLOG bytes wait
// in xterm, which bounds memory; past that the server skips ahead with a gap.

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { WebLinksAddon } from '@xterm/addon-web-links';
import { Unicode11Addon } from '@xterm/addon-unicode11';
import { termTheme } from './theme.js';

const WINDOW = 256 * 1024; // credit granted per terminal channel
const HIDDEN_BACKLOG = 8 * 1024 * 1024; // unprocessed bytes allowed while hidden

// isReply tells xterm's answers to queries from what keys send: device
// attributes (CSI ? … c, CSI > … c), status and cursor reports (CSI … n,
// CSI row;col R), mode reports (CSI … $ y), colour and other OSC
// answers, DCS answers (XTVERSION, DECRQSS).
const isReply = (d) =>
  typeof d === 'string' &&
  /^\x1b(\[[?>]?[\d;]*c|\[\d*n|\[\d+;\d+R|\[\??[\d;]*\$y|\][\s\S]*(\x07|\x1b\\)|P[\s\S]*\x1b\\)$/.test(d);
const dim = (s) => `\r\n\x1b[2m${s}\x1b[0m\r\n`;
const ECHO_MS = 3000; // a keystroke with no output for this long: check the socket
const TYPEAHEAD_MAX = 4096; // characters typed while the channel is away, sent once it is back

/**
 * TerminalView attaches to terminal `info.id` over `client` and draws it in
 * `pane`. Call attach() after each handshake; it resumes from the last byte
 * drawn. Callbacks: onExit(view), onGone(view), onChange(view).
 */
export class TerminalView {
  constructor({ client, info, pane, onChange = () => {} }) {
    this.client = client;
    this.id = info.id;
    this.instance = info.instance;
    this.title = info.title || info.id;
    this.pane = pane;
    this.onChange = onChange;
    this.exited = !!info.exited;
    this.gone = false;
    this.ch = null;
    this.offset = null; // next terminal output byte we expect; null before the first sync
    this.replaying = false; // drawing retained output: input is ignored
    this.backlog = 0; // bytes handed to xterm, not yet processed
    this.size = null; // {cols, rows} last sent
    this.attaching = null;

    this.term = new Terminal({
      fontFamily: 'ui-monospace, "Cascadia Mono", "DejaVu Sans Mono", Menlo, Consolas, monospace',
      fontSize: 14,
      // At the default 1.0, rows clip what a font draws below its box:
      // DejaVu Sans Mono's underscore vanished (foo_bar read foo bar).
      lineHeight: 1.2,
      cursorBlink: true,
      scrollback: 10000,
      allowProposedApi: true, // the unicode API (below)
      theme: termTheme(),
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.loadAddon(new WebLinksAddon());
    // Emoji and other wide characters take two columns, as in the shell
    // (glibc's wcwidth): with xterm's default Unicode 6 widths the
    // cursor drifted from where bash edits the line.
    this.term.loadAddon(new Unicode11Addon());
    this.term.unicode.activeVersion = '11';
    this.term.open(pane);
    // Input xterm hands over while a key, paste or IME event is being
    // dispatched is the user's; the rest is xterm answering what it drew
    // (DA, DSR, OSC colour queries). Set in the capture phase, before
    // xterm's own listeners, and cleared once the event's task is over
    // (xterm stops the events it handles, so nothing runs after it on
    // them). A write of xterm's that a timer queued earlier may still
    // answer a query inside that window: what looks like an answer is
    // dropped anyway (isReply). An IME's text comes from a timer xterm
    // sets at compositionend: it stays the user's until the one after.
    this.pending = []; // the user's input while the channel is away (type-ahead)
    this.pendingLen = 0;
    this.pendingOver = false; // more was typed than TYPEAHEAD_MAX: none of it goes
    this.userEvent = false;
    const clear = () => (this.userEvent = false);
    for (const type of ['keydown', 'keypress', 'beforeinput', 'input', 'paste']) {
      pane.addEventListener(type, () => {
        this.userEvent = true;
        setTimeout(clear, 0);
      }, true);
    }
    pane.addEventListener('compositionend', () => {
      this.userEvent = true;
      setTimeout(() => setTimeout(() => (this.userEvent = false), 0), 0);
    }, true);
    // Another page on this terminal may have resized it meanwhile: the
    // page being used sets the size again.
    this.term.textarea?.addEventListener('focus', () => this.refit(true));
    this.term.onData((s) => this.#input(s));
    this.term.onBinary((s) => this.#input(Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ cols, rows }) => this.#sendSize(cols, rows));
    this.resizeObs = new ResizeObserver(() => this.refit());
    this.resizeObs.observe(pane);
  }

  /** setTheme follows the system colour scheme. */
  setTheme() {
    this.term.options.theme = termTheme();
  }

  /** focus puts the keyboard in this terminal. */
  focus() {
    this.term.focus();
  }

  /**
   * refit sizes the terminal to its pane (when the pane is shown). With
   * force it sends the size even if unchanged here: another page on the
   * same terminal may have set its own.
   */
  refit(force = false) {
    if (this.pane.offsetParent === null || this.pane.clientWidth === 0) return; // hidden
    cancelAnimationFrame(this.fitFrame);
    this.fitFrame = requestAnimationFrame(() => {
      try {
        this.fit.fit();
      } catch {
        // Not measurable yet (no renderer): the next resize refits.
      }
      if (force) this.size = null;
      this.#sendSize(this.term.cols, this.term.rows);
    });
  }

  /** attach opens (or reopens) the terminal channel. */
  async attach() {
    if (this.attaching) return this.attaching;
    // An ended terminal was drawn to its end: reattaching would replay it.
    if (this.gone || (this.exited && this.offset !== null)) return;
    this.attaching = this.#attach().finally(() => (this.attaching = null));
    return this.attaching;
  }

  async #attach() {
    const params = { id: this.id };
    if (this.instance) params.instance = this.instance;
    if (this.offset !== null) params.from = this.offset;
    this.replaying = true;
    this.synced = false;
    this.size = null;
    let ch;
    try {
      ch = await this.client.open('terminal', params, {
        onData: (b, c) => this.#data(c, b),
        onCtrl: (op, c) => this.#ctrl(c, op),
        onEof: (c) => c.close(),
        onClose: (info, c) => this.#closed(c, info),
      }, { window: WINDOW });
    } catch (err) {
      this.replaying = false;
      if (err.reason === 'gone' || err.reason === 'not_found') {
        this.#markGone(err.reason === 'gone' ? 'replaced by a new terminal' : 'no longer exists');
      }
      return;
    }
    this.ch = ch;
    this.instance = ch.meta.instance || this.instance;
    if (this.offset === null) this.offset = ch.meta.first ?? 0;
    // A resize is not remembered across reconnects by every server path:
    // always send ours right away.
    if (this.pane.clientWidth > 0) this.#sendSize(this.term.cols, this.term.rows);
    this.refit();
    this.#flushPending();
    this.onChange(this);
  }

  #data(ch, bytes) {
    clearTimeout(this.echoTimer);
    this.echoTimer = null;
    const n = bytes.length;
    if (this.offset !== null) this.offset += n;
    this.backlog += n;
    if (typeof document !== 'undefined' && document.hidden && this.backlog < HIDDEN_BACKLOG) {
      ch.consume(n);
      this.term.write(bytes, () => (this.backlog -= n));
    } else {
      this.term.write(bytes, () => {
        this.backlog -= n;
        ch.consume(n);
      });
    }
  }

  #ctrl(ch, op) {
    switch (op.op) {
      case 'sync':
        // The next byte is output byte op.offset; replay is over once
        // xterm has drawn (and possibly "answered") what came before.
        this.offset = op.offset;
        this.term.write('', () => {
          if (this.ch === ch || this.ch === null) this.replaying = false;
          this.#flushPending();
        });
        break;
      case 'gap':
        this.term.write(dim(`[… ${op.bytes} bytes of output were not kept …]`));
        break;
      case 'exit':
        this.exited = true;
        this.exitCode = op.code;
        this.exitSignal = op.signal;
        this.term.write(dim(`${op.signal ? `[terminal ended by signal ${op.signal}]` : `[terminal exited with code ${op.code}]`}${this.#dropPending()} + opens a new one`));
        this.onChange(this);
        break;
    }
  }

  #closed(ch, info) {
    if (this.ch === ch) this.ch = null;
    this.replaying = false;
    this.onChange(this);
  }

  #markGone(why) {
    this.gone = true;
    this.term.write(dim(`[terminal ${why}]${this.#dropPending()}`));
    this.onChange(this);
  }

  // dropPending forgets the type-ahead; it says what was lost, if any.
  #dropPending() {
    const n = this.pendingLen;
    const over = this.pendingOver;
    this.pending = [];
    this.pendingLen = 0;
    this.pendingOver = false;
    if (over) return ` (over ${TYPEAHEAD_MAX} characters typed meanwhile: not sent)`;
    return n > 0 ? ` (${n} typed characters not sent)` : '';
  }

  // flushPending sends the type-ahead once the channel is back and its
  // replay drawn. Past the bound none of it goes: a command with a hole
  // in it (a paste dropped, the Enter after it kept) must not run.
  #flushPending() {
    if (!this.ch || this.replaying || this.exited) return;
    if (this.pendingOver) {
      this.term.write(dim(`[reconnected${this.#dropPending()}]`));
      return;
    }
    if (this.pendingLen === 0) return;
    for (const d of this.pending) this.ch.write(d);
    this.pending = [];
    this.pendingLen = 0;
    this.#expectEcho();
  }

  #input(data) {
    if (this.exited || this.gone) return;
    if (this.replaying || !this.ch) {
      // Typed while the socket reconnects or a replay is drawn: kept
      // (bounded) and sent once the channel is back, as over ssh. What
      // xterm answers to replayed queries is not the user's and must not
      // be typed into the shell: dropped.
      if (!this.userEvent || this.pendingOver || isReply(data)) return;
      if (this.pendingLen + data.length > TYPEAHEAD_MAX) {
        this.pendingOver = true;
        return;
      }
      this.pending.push(this.#ctrlSticky(data));
      this.pendingLen += data.length;
      return;
    }
    this.ch.write(this.#ctrlSticky(data));
    this.#expectEcho();
  }

  // ctrlSticky applies the phone key bar's sticky Ctrl to data.
  #ctrlSticky(data) {
    if (this.ctrlNext && typeof data === 'string' && data.length === 1) {
      // The phone key bar's sticky Ctrl: a letter becomes its control code.
      const c = data.toLowerCase().charCodeAt(0);
      if (c >= 0x40 && c <= 0x7f) data = String.fromCharCode(c & 0x1f);
      this.ctrlNext = false;
      this.onChange(this);
    }
    return data;
  }

  /**
   * expectEcho: a keystroke normally gets output back within milliseconds.
   * With none for ECHO_MS the socket may be dead without a close (a
   * frozen daemon, a lost network): check it now rather than at the next
   * keepalive, half a minute later, while keys go nowhere.
   */
  #expectEcho() {
    if (this.echoTimer) return;
    this.echoTimer = setTimeout(() => {
      this.echoTimer = null;
      this.client.checkAlive?.();
    }, ECHO_MS);
  }

  /** sendKeys types a key sequence (from the on-screen key bar). */
  sendKeys(seq) {
    if (this.replaying || !this.ch || this.exited) return;
    this.ch.write(seq);
    this.#expectEcho();
  }

  /** copySelection puts the selected text on the clipboard; false if none. */
  copySelection() {
    if (!this.term.hasSelection()) return false;
    const text = this.term.getSelection();
    navigator.clipboard?.writeText(text).catch(() => {});
    this.term.clearSelection();
    return true;
  }

  #sendSize(cols, rows) {
    if (!this.ch || !cols || !rows) return;
    if (this.size && this.size.cols === cols && this.size.rows === rows) return;
    this.size = { cols, rows };
    this.ch.ctrl({ op: 'resize', cols, rows });
  }

  /** detach closes the channel but keeps the terminal running. */
  detach() {
    this.ch?.close();
    this.ch = null;
  }

  /** dispose detaches and frees xterm. */
  dispose() {
    clearTimeout(this.echoTimer);
    this.detach();
    this.resizeObs.disconnect();
    this.term.dispose();
  }
}
