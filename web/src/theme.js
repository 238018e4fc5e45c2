// theme.js — colours that follow the system's light/dark preference.

const dark = {
  background: '#16181d',
  foreground: '#d7dae0',
  cursor: '#e6e6e6',
  cursorAccent: '#16181d',
  selectionBackground: '#3a4a66',
  black: '#1e2127', red: '#e06c75', green: '#98c379', yellow: '#d19a66',
  blue: '#61afef', magenta: '#c678dd', cyan: '#56b6c2', white: '#abb2bf',
  brightBlack: '#5c6370', brightRed: '#ef7b84', brightGreen: '#a9d48a', brightYellow: '#e5c07b',
  brightBlue: '#74bbf5', brightMagenta: '#d38bea', brightCyan: '#6ccad6', brightWhite: '#ffffff',
};

const light = {
  background: '#fbfbfa',
  foreground: '#24292f',
  cursor: '#24292f',
  cursorAccent: '#fbfbfa',
  selectionBackground: '#b6d3f5',
  black: '#24292f', red: '#c4323d', green: '#2d7d32', yellow: '#8a6100',
  blue: '#0a5bc4', magenta: '#8e3bb8', cyan: '#0e7c86', white: '#6e7781',
  brightBlack: '#57606a', brightRed: '#d7434e', brightGreen: '#38913d', brightYellow: '#9a6f00',
  brightBlue: '#1f6fd6', brightMagenta: '#a04fcb', brightCyan: '#1a8f99', brightWhite: '#8c959f',
};

const query = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;

/** isDark reports the system's colour scheme. */
export function isDark() {
  return query ? query.matches : true;
}

/** termTheme is the xterm.js theme for the current scheme. */
export function termTheme() {
  return isDark() ? dark : light;
}

/** onSchemeChange calls fn when the system scheme flips. */
export function onSchemeChange(fn) {
  query?.addEventListener('change', fn);
}
