// execbox.js — run one command, stream its stdout and stderr while it runs,
// then show its exit code. The exec RPC carries a client-chosen id; a
// process channel on that id streams the output live.

import { ensureSession } from './procs.js';
import { el, fmtMs } from './ui.js';

const MAX_SHOWN = 1024 * 1024; // characters kept in the box
const OPEN_TRIES = 40; // the channel may be opened before exec registers the id

/**
 * waitWhileStreaming resolves once run's channel ended (run.eof), or once
 * no byte came for idleMs, or after maxMs in all.
 */
async function waitWhileStreaming(run, idleMs, maxMs) {
  let ended = false;
  run.eof.then(() => (ended = true));
  const t0 = performance.now();
  while (!ended) {
    const now = performance.now();
    const last = Math.max(run.lastData ?? 0, t0);
    if (now - last >= idleMs || now - t0 >= maxMs) return;
    await Promise.race([run.eof, new Promise((r) => setTimeout(r, Math.min(250, idleMs - (now - last))))]);
  }
}

/** ExecBox wires the exec form to the output area. */
export class ExecBox {
  constructor({ client, form, out }) {
    this.client = client;
    this.form = form;
    this.out = out;
    this.run = null;
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (this.run) this.run.abort.abort();
      else this.#start();
    });
  }

  async #start() {
    const data = new FormData(this.form);
    const command = String(data.get('command') || '').trim();
    const sessionId = String(data.get('session') || '').trim();
    if (!command) {
      this.out.replaceChildren(el('div', { class: 'exec-status' }, 'Type a command to run.'));
      return;
    }
    const id = `exec-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const run = { id, abort: new AbortController(), shown: 0, streamed: false, eof: null };
    this.run = run;
    const btn = this.form.querySelector('button[type=submit]');
    btn.textContent = 'Cancel';
    btn.classList.add('danger');
    const body = el('pre', { class: 'exec-body' });
    const status = el('div', { class: 'exec-status', role: 'status' }, 'running…');
    this.out.replaceChildren(el('div', { class: 'exec-cmd' }, `$ ${command}`), body, status);
    run.body = body;
    const t0 = performance.now();
    let result;
    try {
      if (sessionId) await ensureSession(this.client, sessionId);
      const params = { command, id };
      if (sessionId) params.sessionId = sessionId;
      const call = this.client.call('exec', params, { signal: run.abort.signal });
      this.#stream(run, call);
      result = await call;
    } catch (err) {
      status.textContent = err.reason === 'cancelled' ? 'cancelled (the command was killed)' : `failed: ${err.message}`;
      status.className = 'exec-status bad';
      this.#done(run);
      return;
    }
    // The channel ends with the process's last byte; wait for it while
    // bytes keep coming (a long replay on a busy machine takes seconds),
    // else, after 2 s without any, show what the result carries.
    await waitWhileStreaming(run, 2000, 60000);
    // The channel had every byte (or all the box shows): the result's
    // copy, cut at 256 KiB per stream, is not needed.
    const whole = run.streamed && (run.eofSeen || run.shown >= MAX_SHOWN);
    if (!whole) {
      body.replaceChildren();
      run.shown = 0;
      this.#append(run, 'stdout', result.stdout ?? '');
      this.#append(run, 'stderr', result.stderr ?? '');
    }
    const trunc = !whole && (result.stdoutTruncated || result.stderrTruncated) ? ' · output truncated' : '';
    const code = result.timedOut ? 'timed out' : result.signal ? `killed by signal ${result.signal}` : `exit code ${result.exitCode}`;
    status.textContent = `${code} · ${fmtMs(result.durationMs ?? performance.now() - t0)}${trunc}`;
    status.className = `exec-status ${result.exitCode === 0 ? 'ok' : 'bad'}`;
    this.#done(run);
  }

  // stream attaches a process channel to the exec's id and shows its bytes.
  async #stream(run, call) {
    let settled = false;
    call.then(() => (settled = true), () => (settled = true));
    let markEof;
    run.eof = new Promise((r) => (markEof = r));
    const decoders = { 1: new TextDecoder(), 2: new TextDecoder() };
    // Tried after the exec answered too: a fast command can end before
    // the first try finds its id, and its retained output replays whole.
    for (let i = 0; i < OPEN_TRIES && this.run === run; i++) {
      // Opened after the exec ended, the channel replays each stream
      // apart, in no order between them: shown as the answer would be,
      // stdout then stderr, once both are in.
      const replay = settled ? { stdout: '', stderr: '' } : null;
      const show = () => {
        if (!replay) return;
        this.#append(run, 'stdout', replay.stdout);
        this.#append(run, 'stderr', replay.stderr);
        replay.stdout = replay.stderr = '';
      };
      try {
        run.ch = await this.client.open('process', { id: run.id, follow: true }, {
          onData: (b, ch) => {
            run.streamed = true;
            run.lastData = performance.now();
            const s = b[0] === 2 ? 2 : 1;
            const text = decoders[s].decode(b.subarray(1), { stream: true });
            const name = s === 2 ? 'stderr' : 'stdout';
            if (replay) replay[name] += text;
            else this.#append(run, name, text);
            ch.consume(b.length);
            if (run.shown >= MAX_SHOWN || (replay && replay.stdout.length + replay.stderr.length >= MAX_SHOWN)) {
              show();
              markEof(); // the box is full: the rest stays readable by id
              ch.close();
            }
          },
          onEof: (ch) => {
            show();
            run.eofSeen = true;
            markEof();
            ch.close();
          },
          onClose: () => {
            show();
            markEof();
          },
        });
        return;
      } catch (err) {
        // Not found once the exec answered: it never had a record.
        if (err.reason !== 'not_found' || settled) break;
        await new Promise((r) => setTimeout(r, 25 * Math.min(8, i + 1)));
      }
    }
    markEof();
  }

  #append(run, stream, text) {
    if (!text || run.shown >= MAX_SHOWN) return;
    const room = MAX_SHOWN - run.shown;
    const t = text.length > room ? text.slice(0, room) + '\n[… more output not shown here …]\n' : text;
    run.shown += t.length;
    const last = run.body.lastElementChild;
    if (last && last.dataset.stream === stream) last.append(t);
    else run.body.append(el('span', { class: stream === 'stderr' ? 'err' : '', 'data-stream': stream }, t));
    run.body.scrollTop = run.body.scrollHeight;
  }

  #done(run) {
    run.ch?.close();
    if (this.run === run) this.run = null;
    const btn = this.form.querySelector('button[type=submit]');
    btn.textContent = 'Run';
    btn.classList.remove('danger');
  }
}
