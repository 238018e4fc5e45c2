// The test page: xterm.js with the real SandboxAddon from
// @cloudflare/sandbox@0.12.10, pointed at muxd's /ws/terminal the way the
// SDK's Durable Object proxy would forward it. The query gives the muxd
// address (?muxd=ws://host:port) and the terminal id (?id=...).
import { Terminal } from '@xterm/xterm';
import { SandboxAddon } from '@cloudflare/sandbox/xterm';
import '@xterm/xterm/css/xterm.css';

const params = new URLSearchParams(location.search);
const muxd = params.get('muxd');
const id = params.get('id');

const term = new Terminal({ cols: 100, rows: 30, scrollback: 5000 });
const log = { states: [], errors: [], sockets: 0 };

const addon = new SandboxAddon({
  getWebSocketUrl: ({ sessionId }) => {
    log.sockets++;
    return `${muxd}/ws/terminal?sessionId=${encodeURIComponent(sessionId)}&cols=100&rows=30`;
  },
  onStateChange: (state, error) => {
    log.states.push(state);
    if (error) log.errors.push(error.message);
  },
});
term.loadAddon(addon);
term.open(document.getElementById('term'));
addon.connect({ sandboxId: 'muxd-test', sessionId: id });

// text returns the whole buffer, scrollback included.
function text() {
  const b = term.buffer.active;
  const out = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? '');
  return out.join('\n');
}

// dropSocket closes the addon's socket as a network failure would; the
// addon then reconnects on its own.
function dropSocket() {
  addon.socket?.close();
}

globalThis.addonTest = { term, addon, log, text, dropSocket };
