// auth.js — asks for a token when the daemon wants one.
//
// A browser cannot see a WebSocket's 401, so the page asks GET /auth first
// (200 or 401 for the same credentials). The token is kept in
// sessionStorage: it lives as long as the tab, never in a URL we show.

const KEY = 'muxd.token';

/** AuthNeeded is thrown while the user has not given a valid token. */
export class AuthNeeded extends Error {}

function stored() {
  try {
    return sessionStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

function store(tok) {
  try {
    if (tok) sessionStorage.setItem(KEY, tok);
    else sessionStorage.removeItem(KEY);
  } catch {
    // Storage disabled: the token lasts until the page reloads.
  }
}

/** authStatus asks /auth about token ('' for none): 200, 401, 429 or throws. */
export async function authStatus(token) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const r = await fetch(new URL('auth', location.href), { headers, cache: 'no-store' });
  return r.status;
}

/**
 * makeUrl returns the function the Client calls before each connection:
 * it checks the token and, when the daemon says 401, shows the prompt
 * (`dialog`) until a valid token is entered. onPrompt(bool) reports it.
 */
export function makeUrl(dialog, onPrompt = () => {}) {
  let token = stored();
  return async () => {
    let status = await authStatus(token);
    if (status === 401) {
      token = await prompt(dialog, token ? 'That token was not accepted.' : '', onPrompt);
      store(token);
    } else if (status !== 200) {
      throw new Error(`/auth answered ${status}`);
    }
    const u = new URL('ws', location.href);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    if (token) u.searchParams.set('token', token);
    return u.toString();
  };
}

// prompt shows the dialog until /auth accepts what is typed.
function prompt(dialog, message, onPrompt) {
  const form = dialog.querySelector('form');
  const input = dialog.querySelector('input[type=password]');
  const msg = dialog.querySelector('.auth-msg');
  msg.textContent = message;
  onPrompt(true);
  if (!dialog.open) dialog.showModal();
  input.focus();
  return new Promise((resolve) => {
    const onSubmit = async (ev) => {
      ev.preventDefault();
      const tok = input.value.trim();
      if (!tok) return;
      msg.textContent = 'Checking…';
      let status;
      try {
        status = await authStatus(tok);
      } catch (err) {
        msg.textContent = `Cannot reach muxd: ${err.message}`;
        return;
      }
      if (status !== 200) {
        // 429: this address gave too many wrong tokens; the daemon
        // compares none from it for a few seconds.
        msg.textContent = status === 429
          ? 'Too many wrong tokens: wait a few seconds, then try again.'
          : 'That token was not accepted.';
        input.select();
        return;
      }
      form.removeEventListener('submit', onSubmit);
      dialog.addEventListener('cancel', (e) => e.preventDefault(), { once: true });
      dialog.close();
      input.value = '';
      onPrompt(false);
      resolve(tok);
    };
    form.addEventListener('submit', onSubmit);
    // Escape must not leave a page that silently never connects.
    dialog.oncancel = (e) => e.preventDefault();
  });
}
