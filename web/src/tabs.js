// tabs.js — terminal and log tabs: create, switch, rename, close, and
// reattach after a reconnect. Keyboard: Alt+T new terminal, Alt+W close,
// Alt+1…9 switch (Ctrl+Option on a Mac, where Option types characters),
// F2 (or double-click) rename, arrows move along the bar. Closing a
// terminal whose shell still runs asks to be confirmed (the same key or
// click again). Ctrl+Shift+C, and Ctrl+C over a selection, copy.

import { TerminalView } from './termview.js';
import { LogView } from './logview.js';
import { el, statusText, toast } from './ui.js';
import { SHORT_MS } from './procs.js';

/** onMac: Option types characters there ([ { | on many layouts). */
export const onMac = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent || '');

/**
 * isShortcut tells page shortcuts apart from keys meant for the shell:
 * Alt+key, or Ctrl+Option+key on a Mac (Option alone is a character).
 */
export function isShortcut(ev) {
  if (ev.type !== 'keydown' || !ev.altKey || ev.metaKey || ev.ctrlKey !== onMac) return false;
  return ev.code === 'KeyT' || ev.code === 'KeyW' || ev.code === 'KeyE' || /^Digit[1-9]$/.test(ev.code);
}

/** shortcutName is how the page names Alt+key to the user. */
export const shortcutName = (key) => (onMac ? `Ctrl+Option+${key}` : `Alt+${key}`);

/**
 * copyKey: Ctrl+Shift+C always (the browser's own use of it, DevTools,
 * is taken over), Ctrl+C only over a selection (else it is the shell's
 * interrupt).
 */
function copyKey(ev, hasSelection) {
  if (ev.type !== 'keydown' || ev.code !== 'KeyC' || !ev.ctrlKey || ev.altKey || ev.metaKey) return false;
  return ev.shiftKey || hasSelection;
}

/**
 * pasteKey: Ctrl+V pastes, as in most terminals off the Mac (Cmd+V
 * there). xterm sent it as ^V, bash's quoted insert, which also took the
 * next key literally; the browser's paste event now goes through
 * instead (Ctrl+Shift+V pastes too).
 */
function pasteKey(ev) {
  return !onMac && ev.type === 'keydown' && ev.code === 'KeyV' && ev.ctrlKey && !ev.shiftKey && !ev.altKey && !ev.metaKey;
}

const CONFIRM_MS = 4000; // a second close within this ends a running terminal

/** Tabs owns the tab bar and the panes. */
export class Tabs {
  constructor({ client, bar, panes, empty }) {
    this.client = client;
    this.bar = bar;
    this.panes = panes;
    this.emptyEl = empty;
    this.tabs = []; // {key, kind, view, tab, pane}
    this.active = null;
    this.closing = null; // {tab, until}: the first of two closes of a running terminal
    this.firstPending = false; // see sync
    this.bootPending = false;
    client.on('notify', (method, p) => {
      if (method === 'terminal.created' && !this.#find(`t:${p.id}`)) {
        this.#fetchTerminal(p.id);
      }
    });
  }

  /**
   * sync reattaches every tab and adds terminals opened elsewhere. On the
   * first handshake, or after the daemon restarted (its terminals are
   * gone), it opens a terminal when none is live.
   */
  async sync({ first, bootChanged }) {
    // What a handshake said holds until a sync gets through: the next
    // handshake no longer says the daemon restarted.
    this.firstPending ||= first;
    this.bootPending ||= bootChanged;
    let list = [];
    try {
      ({ terminals: list = [] } = await this.client.call('terminal.list', {}, { timeoutMs: SHORT_MS }));
    } catch {
      return; // disconnected again
    }
    ({ firstPending: first, bootPending: bootChanged } = this);
    this.firstPending = this.bootPending = false;
    for (const t of list) {
      if (!this.#find(`t:${t.id}`) && !t.exited) this.#addTerminal(t);
    }
    // Terminals never shown stay detached until activated: a page opened
    // next to many busy terminals must not replay all of them at once.
    await Promise.all(this.tabs.filter((t) => t.kind !== 'term' || t.shown).map((t) => t.view.attach()));
    const live = this.tabs.some((t) => t.kind === 'term' && !t.view.gone && !t.view.exited);
    if ((first && this.tabs.length === 0) || (bootChanged && !live)) await this.newTerminal({ auto: true });
    else if (!this.active && this.tabs.length > 0) this.activate(this.tabs[0], !this.#typingElsewhere());
  }

  /**
   * #typingElsewhere tells whether the user is in a form field outside
   * the panes (the process or exec form): a tab the page opens by itself
   * must not take the keys from it (an Enter meant for the form would
   * reach the shell).
   */
  #typingElsewhere() {
    const a = document.activeElement;
    return !!a && !this.panes.contains(a) && a.matches('input, textarea, select, [contenteditable]:not([contenteditable="false"])');
  }

  async #fetchTerminal(id) {
    try {
      const { terminals } = await this.client.call('terminal.list', {}, { timeoutMs: SHORT_MS });
      const t = terminals.find((x) => x.id === id);
      if (t && !this.#find(`t:${id}`)) this.#addTerminal(t); // attached when shown
    } catch {
      // The next handshake's sync picks it up.
    }
  }

  /**
   * newTerminal creates a terminal on the daemon and opens its tab. With
   * auto (the page's own first terminal) it takes the focus only if the
   * user is not typing elsewhere by then.
   */
  async newTerminal({ auto = false } = {}) {
    if (this.client.state !== 'open') {
      // Not queued: a click while disconnected would open a terminal
      // later, next to the one the reconnect opens.
      this.#flash('Not connected: a new terminal can be opened once muxd is back.');
      return null;
    }
    // The lowest free "shell N": the page's counter started again at
    // each load, next to terminals it had opened before.
    const used = new Set(this.tabs.filter((t) => t.kind === 'term').map((t) => t.view.title));
    try {
      // Other pages' terminals too: two tabs named "shell 1" otherwise.
      const { terminals } = await this.client.call('terminal.list', {}, { timeoutMs: SHORT_MS });
      for (const t of terminals ?? []) used.add(t.title);
    } catch {
      // The page's own names are enough to go on with.
    }
    let n = 1;
    while (used.has(`shell ${n}`)) n++;
    const params = { title: `shell ${n}` };
    const size = this.#guessSize();
    if (size) Object.assign(params, size);
    try {
      const t = await this.client.call('terminal.create', params, { timeoutMs: SHORT_MS });
      let tab = this.#find(`t:${t.id}`);
      // Asked again after the attach: the user may have moved meanwhile.
      const focus = () => !auto || !this.#typingElsewhere();
      if (!tab) tab = this.#addTerminal(t);
      this.activate(tab, focus());
      await tab.view.attach();
      if (focus()) tab.view.focus();
      return tab;
    } catch (err) {
      this.#flash(`Could not create a terminal: ${err.message}`);
      return null;
    }
  }

  /** openLog opens (or focuses) the log tab of process p. */
  openLog(p) {
    let tab = this.#find(`p:${p.id}`);
    if (!tab) {
      const pane = el('div', { class: 'pane log', role: 'tabpanel' });
      this.panes.append(pane);
      const view = new LogView({ client: this.client, proc: { ...p }, pane, onChange: () => this.#label(tab) });
      tab = this.#addTab(`p:${p.id}`, 'log', view, pane, p.command);
      view.attach();
    }
    this.activate(tab);
    tab.view.body.focus();
  }

  /** updateProcess passes a fresher Process record to its log tab. */
  updateProcess(p) {
    const tab = this.#find(`p:${p.id}`);
    if (tab) {
      tab.view.update(p);
      this.#label(tab);
    }
  }

  /** #addTerminal adds t's tab, and shows it if no tab is shown yet. */
  #addTerminal(t) {
    const pane = el('div', { class: 'pane term', role: 'tabpanel' });
    this.panes.append(pane);
    const tab = this.#addTab(`t:${t.id}`, 'term', null, pane, t.title || t.id);
    tab.view = new TerminalView({ client: this.client, info: t, pane, onChange: () => this.#label(tab) });
    tab.view.term.attachCustomKeyEventHandler((ev) => {
      if (isShortcut(ev) || pasteKey(ev)) return false;
      if (copyKey(ev, tab.view.term.hasSelection())) {
        ev.preventDefault();
        tab.view.copySelection();
        return false;
      }
      return true;
    });
    if (!this.active) this.activate(tab, !this.#typingElsewhere());
    return tab;
  }

  #addTab(key, kind, view, pane, title) {
    const label = el('span', { class: 'tab-label' }, title);
    const close = el('span', { class: 'tab-close', role: 'button', 'aria-label': `Close ${title}`, title: kind === 'term' ? `Close and end this terminal (${shortcutName('W')})` : 'Close this log (the process keeps running)' }, '×');
    const btn = el('button', { type: 'button', class: `tab ${kind}`, role: 'tab', 'aria-selected': 'false', tabindex: '-1' }, label, close);
    const tab = { key, kind, view, tab: btn, pane, label };
    pane.hidden = true;
    btn.addEventListener('click', (ev) => {
      if (ev.target === close) this.close(tab);
      else this.activate(tab);
    });
    btn.addEventListener('auxclick', (ev) => {
      if (ev.button === 1) this.close(tab);
    });
    btn.addEventListener('dblclick', () => this.rename(tab));
    btn.addEventListener('keydown', (ev) => this.#tabKey(ev, tab));
    this.bar.append(btn);
    this.tabs.push(tab);
    this.emptyEl.hidden = true;
    return tab;
  }

  #tabKey(ev, tab) {
    const i = this.tabs.indexOf(tab);
    let next = null;
    if (ev.key === 'ArrowRight') next = this.tabs[(i + 1) % this.tabs.length];
    else if (ev.key === 'ArrowLeft') next = this.tabs[(i - 1 + this.tabs.length) % this.tabs.length];
    else if (ev.key === 'Home') next = this.tabs[0];
    else if (ev.key === 'End') next = this.tabs[this.tabs.length - 1];
    else if (ev.key === 'F2') {
      ev.preventDefault();
      this.rename(tab);
    } else if (ev.key === 'Delete') this.close(tab);
    if (next) {
      ev.preventDefault();
      this.activate(next, false);
      next.tab.focus();
    }
  }

  /** activate shows tab (and focuses its content unless told not to). */
  activate(tab, focus = true) {
    for (const t of this.tabs) {
      const on = t === tab;
      t.pane.hidden = !on;
      t.tab.setAttribute('aria-selected', String(on));
      t.tab.tabIndex = on ? 0 : -1;
      t.tab.classList.toggle('active', on);
    }
    this.active = tab;
    tab.shown = true;
    if (tab.kind === 'term') {
      if (!tab.view.ch) tab.view.attach();
      tab.view.refit();
      if (focus) tab.view.focus();
    } else {
      tab.view.show();
    }
    tab.tab.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }

  /**
   * close ends a terminal (terminal.destroy) or detaches a log. A terminal
   * whose shell still runs is ended only on a second close within
   * CONFIRM_MS: a stray Alt+W or click must not kill what runs in it.
   */
  async close(tab) {
    if (tab.kind === 'term' && !tab.view.gone && !tab.view.exited) {
      const now = Date.now();
      if (this.closing?.tab !== tab || now > this.closing.until) {
        this.closing = { tab, until: now + CONFIRM_MS };
        this.#flash(`“${tab.view.title}” is still running: close it again within ${CONFIRM_MS / 1000} s to end it and everything running in it.`);
        return;
      }
      this.closing = null;
    }
    if (tab.kind === 'term' && !tab.view.gone) {
      // Destroy an exited terminal too: that frees its retained output.
      try {
        await this.client.call('terminal.destroy', { id: tab.view.id }, { timeoutMs: SHORT_MS });
      } catch (err) {
        if (err.reason !== 'not_found') {
          this.#flash(`Could not close the terminal: ${err.message}`);
          return;
        }
      }
    }
    const i = this.tabs.indexOf(tab);
    if (i < 0) return;
    this.tabs.splice(i, 1);
    tab.view.dispose();
    tab.tab.remove();
    tab.pane.remove();
    if (this.active === tab) {
      this.active = null;
      const next = this.tabs[Math.min(i, this.tabs.length - 1)];
      if (next) this.activate(next);
    }
    this.emptyEl.hidden = this.tabs.length > 0;
  }

  /** rename edits a terminal's title in place (terminal.update). */
  rename(tab) {
    if (tab.kind !== 'term') return;
    const input = el('input', { class: 'tab-edit', value: tab.label.textContent, 'aria-label': 'Terminal title' });
    tab.label.replaceWith(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      input.replaceWith(tab.label);
      if (save && title && title !== tab.label.textContent) {
        const old = tab.label.textContent;
        tab.label.textContent = title;
        try {
          await this.client.call('terminal.update', { id: tab.view.id, title }, { timeoutMs: SHORT_MS });
          tab.view.title = title;
        } catch (err) {
          tab.label.textContent = old;
          this.#flash(`Could not rename: ${err.message}`);
        }
      }
      tab.view.focus();
    };
    input.addEventListener('keydown', (ev) => {
      ev.stopPropagation();
      if (ev.key === 'Enter') finish(true);
      if (ev.key === 'Escape') finish(false);
    });
    input.addEventListener('click', (ev) => ev.stopPropagation());
    input.addEventListener('blur', () => finish(true));
  }

  /** onKey handles the page shortcuts (document keydown, capture phase). */
  onKey(ev) {
    if (!isShortcut(ev)) return;
    ev.preventDefault();
    ev.stopPropagation();
    if (ev.code === 'KeyT') this.newTerminal();
    else if (ev.code === 'KeyW' && this.active) this.close(this.active);
    else {
      const t = this.tabs[Number(ev.code.slice(5)) - 1];
      if (t) this.activate(t);
    }
  }

  /** refit resizes the visible terminal (after a layout change). */
  refit(force = false) {
    if (this.active?.kind === 'term') this.active.view.refit(force);
  }

  setTheme() {
    for (const t of this.tabs) if (t.kind === 'term') t.view.setTheme();
  }

  #label(tab) {
    if (!tab) return;
    const v = tab.view;
    let state = '';
    if (tab.kind === 'term') {
      if (tab === this.active) document.querySelector('#keybar [data-ctrl]')?.setAttribute('aria-pressed', String(!!v.ctrlNext));
      if (v.gone) state = 'gone';
      else if (v.exited) state = 'exited';
      else if (!v.ch) state = 'detached';
    } else {
      state = v.proc.status === 'running' ? 'running' : 'ended';
      tab.tab.title = `${v.proc.command} — ${statusText(v.proc)}`;
    }
    tab.tab.dataset.state = state;
  }

  #find(key) {
    return this.tabs.find((t) => t.key === key) ?? null;
  }

  // guessSize estimates cols/rows for a new terminal from the pane size so
  // the shell starts at the right width (the fit after attach corrects it).
  #guessSize() {
    const w = this.panes.clientWidth;
    const h = this.panes.clientHeight;
    if (!w || !h) return null;
    return { cols: Math.max(20, Math.floor((w - 16) / 8.4)), rows: Math.max(5, Math.floor((h - 8) / 17)) };
  }

  #flash(msg) {
    toast(msg);
  }
}
