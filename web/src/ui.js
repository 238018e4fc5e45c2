// ui.js — small DOM and formatting helpers shared by the views.

/** el creates an element with attributes and children. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  e.append(...children);
  return e;
}

/** toast shows a short message at the bottom for a few seconds. */
export function toast(msg) {
  const n = el('div', { class: 'toast', role: 'alert' }, msg);
  document.body.append(n);
  setTimeout(() => n.remove(), 5000);
}

/** statusText describes a Process's state: "running", "exited 0", "killed (TERM)". */
export function statusText(p) {
  switch (p.status) {
    case 'running':
      return 'running';
    case 'exited':
      return p.signal ? `exited by signal ${p.signal}` : `exited ${p.exitCode}`;
    case 'killed':
      return `killed${p.signal ? ` (${p.signal})` : ''}`;
    case 'timed_out':
      return 'timed out';
    case 'failed_to_start':
      return 'failed to start';
    default:
      return p.status ?? 'unknown';
  }
}

/** statusClass maps a Process to a CSS class for its chip. */
export function statusClass(p) {
  if (p.status === 'running') return 'run';
  if (p.status === 'exited' && !p.signal && p.exitCode === 0) return 'ok';
  return 'bad';
}

/** fmtMs prints a duration in milliseconds for people. */
export function fmtMs(ms) {
  if (!(ms >= 0)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.floor(s % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** fmtDuration is a Process's run time (so far, while running). */
export function fmtDuration(p) {
  const start = Date.parse(p.startedAt);
  if (Number.isNaN(start)) return '';
  const end = p.endedAt ? Date.parse(p.endedAt) : Date.now();
  return fmtMs(end - start);
}
