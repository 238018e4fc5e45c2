package exec

import (
	"strconv"
	"strings"
)

// The session wrapper. Each command is one short line on the shell's
// stdin, `__muxd_n=N;\builtin eval "$__muxd_w"`, where N is the command's
// sequence number and the readonly variables __muxd_w (or __muxd_wi, with
// stdin) and __muxd_d (the session's file directory, D) were set when the
// shell started. The wrapper text is:
//
//	\builtin trap '\builtin return 130 2>/dev/null' INT
//	{ \builtin source D/N.c;} <IN >|D/N.o 2>|D/N.e 3>&-
//	__muxd_rc=$?
//	\builtin printf '%s\n' "$__muxd_rc" >&3 || \builtin printf '%s\n' "$__muxd_rc" >|D/x/N.x
//
// Why each piece:
//   - `\builtin` everywhere: aliases (`alias printf=...`) and functions
//     named like builtins cannot hijack the wrapper.
//   - the command runs as a group in the main shell, so cd/export/
//     functions/aliases persist; its text is sourced from a file, so
//     unbalanced quotes, heredocs and syntax errors cannot wedge the
//     parser reading stdin.
//   - fd 3 (the control pipe) is closed for the group: the user's
//     `exec 3>&-` only touches the group's copy, which bash restores, and
//     nothing the command starts can write a fake marker.
//   - `>|` writes through `set -o noclobber`; expansions are quoted
//     against IFS changes; `$?` is always set, so `set -u` is harmless.
//   - the INT trap makes Ctrl-C (session.interrupt) return from the
//     sourced command even in a builtin-only loop; outside a sourced file
//     the `return` fails silently and the marker is still written.
//   - if fd 3 is unusable, the exit record file is the fallback, picked up
//     by the exit watcher.
//   - stdin is /dev/null unless bytes were given, so readers get EOF.
//   - eval of a variable keeps the line short: bash reads a pipe one byte
//     per syscall (a 230-byte line is 230 reads), and sourcing a wrapper
//     file cost twice the CPU (measured). eval runs at top level, so
//     `declare` in the command stays global.
func wrapperLine(seq uint64, withStdin bool) string {
	w := `"$__muxd_w"`
	if withStdin {
		w = `"$__muxd_wi"`
	}
	return "__muxd_n=" + strconv.FormatUint(seq, 10) + `;\builtin eval ` + w + "\n"
}

// wrapperText is the wrapper run by eval for command $__muxd_n.
func wrapperText(withStdin bool) string {
	in := "/dev/null"
	if withStdin {
		in = `"$__muxd_d/$__muxd_n.i"`
	}
	return `\builtin trap '\builtin return 130 2>/dev/null' INT;{ \builtin source "$__muxd_d/$__muxd_n.c";} <` + in +
		` >|"$__muxd_d/$__muxd_n.o" 2>|"$__muxd_d/$__muxd_n.e" 3>&-;__muxd_rc=$?;` +
		`\builtin printf '%s\n' "$__muxd_rc" >&3||\builtin printf '%s\n' "$__muxd_rc" >|"$__muxd_d/x/$__muxd_n.x"`
}

// setupLine is the shell's first input: the readonly variables of the
// wrapper (users cannot unset or change them).
func setupLine(dir string) string {
	return `\builtin readonly __muxd_d=` + shQuote(dir) + ` __muxd_w=` + shQuote(wrapperText(false)) +
		` __muxd_wi=` + shQuote(wrapperText(true)) + "\n"
}

// shQuote quotes s for bash as one word.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// snapshotScript prints the session state as a script a fresh bash can
// source: variables and functions first, options last (so `set -e` or
// `set -u` cannot break the restore), cwd at the very end.
const snapshotScript = `\builtin export -p
\builtin declare -f
\builtin alias -p
\builtin umask -p
\builtin shopt -p
\builtin set +o
\builtin printf 'cd -- %q\n' "$PWD"
`

// stateScript prints the cwd and the exported environment, NUL-separated.
const stateScript = `\builtin printf '%s\0' "$PWD"; \builtin command env -0
`

// parseMarker parses "STATUS\n" from the control pipe.
func parseMarker(line string) (status int, ok bool) {
	st, err := strconv.Atoi(strings.TrimSpace(line))
	return st, err == nil
}
