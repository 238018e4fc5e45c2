// main.js — the muxd page: terminal and log tabs, the process list and the
// exec box, all over one wsmux/1 socket.

import '@xterm/xterm/css/xterm.css';
import './style.css';
import { Client } from './wsmux.js';
import { makeUrl } from './auth.js';
import { Tabs, isShortcut, onMac } from './tabs.js';
import { ProcessList } from './procs.js';
import { ExecBox } from './execbox.js';
import { onSchemeChange } from './theme.js';

const $ = (sel) => document.querySelector(sel);

let prompting = false;
const client = new Client({
  url: makeUrl($('#auth'), (on) => {
    prompting = on;
    showState();
  }),
  name: 'muxd-web/1',
});

const tabs = new Tabs({ client, bar: $('#tabs'), panes: $('#panes'), empty: $('#empty-state') });
const procs = new ProcessList({
  client,
  root: $('#proc-list'),
  form: $('#proc-form'),
  onOpenLog: (p) => {
    tabs.openLog(p);
    setView('work');
  },
  onChange: (p) => {
    tabs.updateProcess(p);
    const n = [...procs.procs.values()].filter((x) => x.status === 'running').length;
    const badge = $('#run-count');
    badge.hidden = n === 0;
    badge.textContent = String(n);
  },
});
new ExecBox({ client, form: $('#exec-form'), out: $('#exec-out') });

// Every handshake (first or after a drop): reattach everything from its
// offsets and re-read lists that notifications may have missed.
client.on('hello', async (_hello, info) => {
  showState();
  await Promise.all([tabs.sync(info), procs.refresh(), refreshSessions()]);
});
client.on('state', showState);
client.on('notify', (method) => {
  if (method.startsWith('session.')) refreshSessions();
});

async function refreshSessions() {
  try {
    const { sessions } = await client.call('session.list', {}, { timeoutMs: 15000 });
    $('#sessions').replaceChildren(...(sessions ?? []).map((s) => Object.assign(document.createElement('option'), { value: s.id })));
  } catch {
    // Not connected: refreshed on the next handshake.
  }
}

// Connection state, always visible.
let countdown = 0;
function showState() {
  const conn = $('#conn');
  const text = conn.querySelector('.conn-text');
  clearInterval(countdown);
  let state = client.state;
  if (prompting) state = 'auth';
  conn.dataset.state = state;
  document.body.dataset.conn = state;
  switch (state) {
    case 'open':
      text.textContent = 'connected';
      break;
    case 'auth':
      text.textContent = 'token required';
      break;
    case 'reconnecting': {
      const tick = () => {
        const s = Math.max(0, Math.ceil(((client.nextRetryAt ?? 0) - Date.now()) / 1000));
        text.textContent = s > 0 ? `reconnecting in ${s}s…` : 'reconnecting…';
      };
      tick();
      countdown = setInterval(tick, 500);
      break;
    }
    case 'closed':
      text.textContent = 'disconnected';
      break;
    default:
      text.textContent = 'connecting…';
  }
}
$('#conn').addEventListener('click', () => client.reconnectNow());
// Back online or back in view: reconnect at once, or make sure the socket
// that looks open still is.
const wake = () => {
  client.reconnectNow();
  client.checkAlive();
};
addEventListener('online', wake);
document.addEventListener('visibilitychange', () => {
  if (document.hidden) return;
  wake();
  tabs.refit(true); // another page may have resized the terminal meanwhile
});

// Phone layout: one view at a time.
function setView(v) {
  document.body.classList.toggle('show-work', v === 'work');
  document.body.classList.toggle('show-side', v === 'side');
  for (const b of document.querySelectorAll('.view-btn')) b.setAttribute('aria-pressed', String(b.dataset.view === v));
  if (v === 'work') tabs.refit();
}
for (const b of document.querySelectorAll('.view-btn')) b.addEventListener('click', () => setView(b.dataset.view));

$('#new-term').addEventListener('click', () => tabs.newTerminal());
$('#empty-new').addEventListener('click', () => tabs.newTerminal());
// The shortcuts are Ctrl+Option on a Mac (see tabs.js): say so there.
if (onMac) {
  for (const e of document.querySelectorAll('.hint, [title*="Alt+"]')) {
    if (e.title) e.title = e.title.replaceAll('Alt+', 'Ctrl+Option+');
    if (e.classList.contains('hint')) {
      e.textContent = e.textContent.replaceAll('Alt+', 'Ctrl+Option+').replace('Ctrl+Shift+C / Ctrl+V', 'Cmd+C / Cmd+V');
    }
  }
}
document.addEventListener('keydown', (ev) => {
  if (isShortcut(ev) && ev.code === 'KeyE') {
    ev.preventDefault();
    setView('side');
    $('#exec-form input[name=command]').focus();
    return;
  }
  tabs.onKey(ev);
}, { capture: true });

// The phone key bar: keys a soft keyboard lacks. Buttons do not take focus,
// so the soft keyboard stays up.
const unescape = (s) => s.replace(/\\x([0-9a-f]{2})|\\t/gi, (m, h) => (h ? String.fromCharCode(parseInt(h, 16)) : '\t'));
for (const b of document.querySelectorAll('#keybar button')) {
  b.addEventListener('pointerdown', (ev) => ev.preventDefault());
  b.addEventListener('click', () => {
    const v = tabs.active?.kind === 'term' ? tabs.active.view : null;
    if (!v) return;
    if (b.hasAttribute('data-ctrl')) {
      v.ctrlNext = !v.ctrlNext;
      b.setAttribute('aria-pressed', String(v.ctrlNext));
    } else {
      v.sendKeys(unescape(b.dataset.seq));
    }
    v.focus();
  });
}
onSchemeChange(() => tabs.setTheme());

// For tests and the curious: the client and views, from the console.
globalThis.muxd = { client, tabs, procs };
client.start();
