package exec

import (
	"strconv"
	"strings"
)

// The session wrapper. Each command is one line on the shell's stdin:
//
//	\builtin trap '\builtin return 130 2>/dev/null' INT
//	{ \builtin source CMD; } <IN >|OUT 2>|ERR 3>&-
//	__muxd_rc=$?
//	\builtin printf '%s %s\n' SEQ "$__muxd_rc" >&3 2>/dev/null || \builtin printf '%s\n' "$__muxd_rc" >|EXIT
//	\builtin unset __muxd_rc
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
//     background jobs never hold the control pipe.
//   - `>|` writes through `set -o noclobber`; "$__muxd_rc" is quoted against
//     IFS changes; `$?` is always set, so `set -u` is harmless.
//   - the INT trap makes Ctrl-C (session.interrupt) return from the
//     sourced command even in a builtin-only loop; the shell survives.
//   - if fd 3 is unusable, the exit record file is the fallback, picked up
//     by the exit watcher.
//   - stdin is /dev/null unless bytes were given, so readers get EOF.
func wrapperLine(cmdPath, stdinPath, outPath, errPath, exitPath string, seq uint64) string {
	var b strings.Builder
	b.Grow(384)
	b.WriteString(`\builtin trap '\builtin return 130 2>/dev/null' INT; { \builtin source `)
	b.WriteString(shQuote(cmdPath))
	b.WriteString("; } <")
	b.WriteString(shQuote(stdinPath))
	b.WriteString(" >|")
	b.WriteString(shQuote(outPath))
	b.WriteString(" 2>|")
	b.WriteString(shQuote(errPath))
	b.WriteString(` 3>&-; __muxd_rc=$?; \builtin printf '%s %s\n' `)
	b.WriteString(strconv.FormatUint(seq, 10))
	b.WriteString(` "$__muxd_rc" >&3 2>/dev/null || \builtin printf '%s\n' "$__muxd_rc" >|`)
	b.WriteString(shQuote(exitPath))
	b.WriteString("; \\builtin unset __muxd_rc\n")
	return b.String()
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

// markerStatus parses "SEQ STATUS" from the control pipe.
func parseMarker(line string) (seq uint64, status int, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(line), " ")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(a, 10, 64)
	st, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return s, st, true
}
