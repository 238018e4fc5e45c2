// procs.js — the live process list: start, kill, remove, open a log.
//
// Kept current by process.started / process.exited notifications, and
// re-read with process.list after every (re)connect, because
// notifications are best effort and are missed while disconnected.

import { el, fmtDuration, statusClass, statusText, toast } from './ui.js';

/** ProcessList renders processes into `root` and starts new ones. */
export class ProcessList {
  constructor({ client, root, form, onOpenLog, onChange = () => {} }) {
    this.client = client;
    this.root = root;
    this.form = form;
    this.onOpenLog = onOpenLog;
    this.onChange = onChange;
    this.procs = new Map();
    this.rows = new Map();
    client.on('notify', (method, p) => this.#notify(method, p));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.#start();
    });
    this.ticker = setInterval(() => this.#tick(), 1000);
  }

  /** refresh re-reads the whole list (after each handshake). */
  async refresh() {
    try {
      const { processes } = await this.client.call('process.list', {}, { timeoutMs: SHORT_MS });
      const seen = new Set();
      for (const p of processes ?? []) {
        seen.add(p.id);
        this.#upsert(p);
      }
      for (const id of [...this.procs.keys()]) if (!seen.has(id)) this.#forget(id);
    } catch {
      // Disconnected again: the next handshake refreshes.
    }
  }

  #notify(method, p) {
    if (method === 'process.started') {
      if (p.status) this.#upsert(p);
      else this.#fetch(p.id);
    } else if (method === 'process.exited') {
      const cur = this.procs.get(p.id);
      if (cur) this.#upsert({ ...cur, ...p });
      // Durations and byte counts come with the full record.
      this.#fetch(p.id);
    }
  }

  async #fetch(id) {
    try {
      this.#upsert(await this.client.call('process.get', { id }, { timeoutMs: SHORT_MS }));
    } catch {
      // Removed meanwhile, or disconnected: the list refresh settles it.
    }
  }

  #upsert(p) {
    const old = this.procs.get(p.id);
    const merged = old ? Object.assign(old, p) : { ...p };
    this.procs.set(p.id, merged);
    this.#renderRow(merged);
    this.onChange(merged);
  }

  #forget(id) {
    this.procs.delete(id);
    this.rows.get(id)?.remove();
    this.rows.delete(id);
    this.#empty();
  }

  async #start() {
    const data = new FormData(this.form);
    const command = String(data.get('command') || '').trim();
    const sessionId = String(data.get('session') || '').trim();
    const msg = this.form.querySelector('.form-msg');
    msg.textContent = command ? '' : 'Type a command to start.';
    if (!command) return;
    const btn = this.form.querySelector('button[type=submit]');
    btn.disabled = true;
    try {
      if (sessionId) await ensureSession(this.client, sessionId);
      const params = { command };
      if (sessionId) params.sessionId = sessionId;
      // With a session it waits its turn there: no time limit then.
      const p = await this.client.call('process.start', params, { timeoutMs: sessionId ? 0 : SHORT_MS });
      this.#upsert(p);
      this.form.elements.command.value = '';
      this.onOpenLog(p);
    } catch (err) {
      msg.textContent = err.message;
    } finally {
      btn.disabled = false;
    }
  }

  #renderRow(p) {
    let row = this.rows.get(p.id);
    if (!row) {
      row = el('li', { class: 'proc', 'data-id': p.id });
      this.rows.set(p.id, row);
      this.root.prepend(row);
    }
    const cmd = el('button', { type: 'button', class: 'proc-cmd', title: `Show the output of ${p.command}` }, p.command);
    cmd.addEventListener('click', () => this.onOpenLog(p));
    const actions = el('span', { class: 'proc-actions' });
    if (p.status === 'running') {
      const kill = el('button', { type: 'button', class: 'btn small danger', title: 'Send TERM to the whole tree (KILL after 2 s)' }, 'Kill');
      kill.addEventListener('click', () => this.client.call('process.kill', { id: p.id }, { timeoutMs: SHORT_MS }).catch((e) => toast(`Kill failed: ${e.message}`)));
      actions.append(kill);
    } else {
      const rm = el('button', { type: 'button', class: 'btn small', title: 'Forget this process and its output' }, 'Remove');
      rm.addEventListener('click', () =>
        this.client.call('process.remove', { id: p.id }, { timeoutMs: SHORT_MS }).then(() => this.#forget(p.id), (e) => toast(`Remove failed: ${e.message}`)));
      actions.append(rm);
    }
    row.replaceChildren(
      el('span', { class: `chip ${statusClass(p)}` }, statusText(p)),
      cmd,
      el('span', { class: 'proc-meta' }, [p.sessionId ? `session ${p.sessionId}` : '', `pid ${p.pid ?? '—'}`].filter(Boolean).join(' · ')),
      el('span', { class: 'proc-dur' }, fmtDuration(p)),
      actions,
    );
    this.#empty();
  }

  #tick() {
    for (const p of this.procs.values()) {
      if (p.status !== 'running') continue;
      const d = this.rows.get(p.id)?.querySelector('.proc-dur');
      if (d) d.textContent = fmtDuration(p);
    }
  }

  #empty() {
    const none = this.procs.size === 0;
    this.root.classList.toggle('empty', none);
  }
}

/** ensureSession creates session id unless it exists. */
export async function ensureSession(client, id) {
  const t = { timeoutMs: SHORT_MS };
  const { sessions } = await client.call('session.list', {}, t);
  const s = (sessions ?? []).find((x) => x.id === id);
  if (s && s.alive !== false) return;
  if (s) await client.call('session.delete', { id }, t);
  await client.call('session.create', { id }, t);
}

/** SHORT_MS bounds calls that should answer at once: never a silent hang. */
export const SHORT_MS = 15000;
