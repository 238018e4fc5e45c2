package exec

import (
	"strconv"
	"strings"
)

// The session wrapper. Each command is one line on the shell's stdin (N
// is the command's sequence number, D the session's file directory, held
// in the readonly variable __muxd_d set when the shell starts):
//
//	\builtin trap '\builtin return 130 2>/dev/null' INT
//	{ \builtin source "D"/N.c;} <IN >|"D"/N.o 2>|"D"/N.e 3>&-
//	__muxd_rc=$?
//	\builtin printf '%s\n' "$__muxd_rc" >&3 || \builtin printf '%s\n' "$__muxd_rc" >|"D"/x/N.x
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
//   - the line is short and the files sourced are tiny: bash reads a pipe
//     one byte per syscall, and a wrapper file of its own cost twice the
//     CPU of this line (measured).
func wrapperLine(seq uint64, withStdin bool) string {
	n := strconv.FormatUint(seq, 10)
	in := "/dev/null"
	if withStdin {
		in = `"$__muxd_d"/` + n + ".i"
	}
	return `\builtin trap '\builtin return 130 2>/dev/null' INT;{ \builtin source "$__muxd_d"/` + n +
		`.c;} <` + in + ` >|"$__muxd_d"/` + n + `.o 2>|"$__muxd_d"/` + n +
		`.e 3>&-;__muxd_rc=$?;\builtin printf '%s\n' "$__muxd_rc" >&3||\builtin printf '%s\n' "$__muxd_rc" >|"$__muxd_d"/x/` + n + ".x\n"
}

// setupLine is the shell's first input: the readonly directory variable
// of wrapperLine (users cannot unset or change it).
func setupLine(dir string) string {
	return `\builtin readonly __muxd_d=` + shQuote(dir) + "\n"
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
