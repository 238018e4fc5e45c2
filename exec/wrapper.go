package exec

import (
	"strconv"
	"strings"
)

// The session wrapper. Each command is one short line on the shell's
// stdin, `\builtin eval "$__muxd_w"`, where the readonly variable
// __muxd_w (or __muxd_wi, with stdin) was set when the shell started. The
// session's files have fixed paths in its directory D, so the line never
// changes. The wrapper text is:
//
//	\builtin trap '\builtin return 130 2>/dev/null' INT
//	{ \builtin source D/c;} <IN >|D/o 2>|D/e
//	__muxd_rc=$?
//	\builtin printf 'MARK %s\n' "$__muxd_rc" || \builtin printf '%s\n' "$__muxd_rc" >|D/x/x
//
// Why each piece:
//   - `\builtin` everywhere: aliases (`alias printf=...`) and functions
//     named like builtins cannot hijack the wrapper.
//   - the command runs as a group in the main shell, so cd/export/
//     functions/aliases persist; its text is sourced from a file, so
//     unbalanced quotes, heredocs and syntax errors cannot wedge the
//     parser reading stdin.
//   - the control pipe is the shell's own stdout, which the group
//     redirects to the FIFO: the marker costs no redirection (each one is
//     ~8 syscalls, ~1-2 µs each on a VM), the user's `exec >&-` or
//     `exec >file` only touches the group's copy, which bash restores,
//     and bash keeps the pipe meanwhile in a close-on-exec fd, so the
//     programs the command starts cannot write a fake marker.
//   - MARK is a random per-session token: what the user's DEBUG, ERR or
//     RETURN traps print at top level also lands on the shell's stdout,
//     and a trap printing a bare number must not pass for a status.
//   - `>|` writes through `set -o noclobber`; paths are quoted literals
//     and the expansion is quoted against IFS changes; `$?` is always
//     set, so `set -u` is harmless.
//   - the INT trap makes Ctrl-C (session.interrupt) return from the
//     sourced command even in a builtin-only loop; outside a sourced file
//     the `return` fails silently and the marker is still written.
//   - if the pipe is unusable, the exit record file is the fallback, picked up
//     by the exit watcher.
//   - stdin is /dev/null unless bytes were given, so readers get EOF.
//   - eval of a variable keeps the line short: bash reads a pipe one byte
//     per syscall (a 230-byte line is 230 reads, a per-command file name
//     in it cost ~12 more), and sourcing a wrapper file cost twice the
//     CPU (measured). eval runs at top level, so `declare` in the
//     command stays global.
func wrapperLine(withStdin bool) string {
	if withStdin {
		return `\builtin eval "$__muxd_wi"` + "\n"
	}
	return `\builtin eval "$__muxd_w"` + "\n"
}

// wrapperText is the wrapper run by eval for a command of session dir,
// with marker token mark (letters and digits).
func wrapperText(dir, mark string, withStdin bool) string {
	in := "/dev/null"
	if withStdin {
		in = shQuote(dir + "/i")
	}
	return `\builtin trap '\builtin return 130 2>/dev/null' INT;{ \builtin source ` + shQuote(dir+"/c") + `;} <` + in +
		` >|` + shQuote(dir+"/o") + ` 2>|` + shQuote(dir+"/e") + `;__muxd_rc=$?;` +
		`\builtin printf '` + mark + ` %s\n' "$__muxd_rc"||\builtin printf '%s\n' "$__muxd_rc" >|` + shQuote(dir+"/x/x")
}

// setupLine is the shell's first input: the readonly variables of the
// wrapper (users cannot unset or change them).
func setupLine(dir, mark string) string {
	return `\builtin readonly __muxd_w=` + shQuote(wrapperText(dir, mark, false)) +
		` __muxd_wi=` + shQuote(wrapperText(dir, mark, true)) + "\n"
}

// shQuote quotes s for bash as one word.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// snapshotScript writes the session state to path as a script a fresh
// bash can source: variables and functions first, options last (so
// `set -e` or `set -u` cannot break the restore), cwd at the very end. The
// file is written where it will live: never a rename, which fails across
// filesystems.
func snapshotScript(path string) string {
	return "{\n" + snapshotBody + "} >|" + shQuote(path) + "\n"
}

const snapshotBody = `\builtin export -p
\builtin declare -f
\builtin alias -p
\builtin umask -p
\builtin shopt -p
\builtin set +o
\builtin printf 'cd -- %q\n' "$PWD"
`

// stateScript writes the cwd and the exported environment,
// NUL-separated, to path.
func stateScript(path string) string {
	return `{ \builtin printf '%s\0' "$PWD"; \builtin command env -0;} >|` + shQuote(path) + "\n"
}

// parseMarker parses "STATUS\n", an exit record or a marker's status.
func parseMarker(line string) (status int, ok bool) {
	st, err := strconv.Atoi(strings.TrimSpace(line))
	return st, err == nil
}
