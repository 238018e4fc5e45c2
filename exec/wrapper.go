package exec

import (
	"strconv"
	"strings"

	"github.com/muxd/muxd/internal/proc"
)

// The session loop. The shell's first input defines the readonly variable
// __muxd_L and evals it: a loop, parsed once, that runs one command per
// line it reads from stdin (an empty line, or "i" when the command has
// stdin). With D the session's directory and MARK its token:
//
//	while ((1)); do
//	  [[ -z ${__muxd_p-} ]] || { __muxd_p=; EMIT 0; }
//	  IFS= \builtin read -r __muxd_x || { (($?>128)) && \builtin continue; \builtin exit; }
//	  \builtin trap '\builtin return 130 2>/dev/null' INT
//	  __muxd_p=1
//	  if [[ $__muxd_x == i ]]; then
//	    for __muxd_i in 1; do { \builtin source D/c;} <D/i >|D/o 2>|D/e; done
//	  else
//	    for __muxd_i in 1; do { \builtin source D/c;} </dev/null >|D/o 2>|D/e; done
//	  fi
//	  __muxd_rc=$?; __muxd_p=; EMIT "$__muxd_rc"
//	done
//	__muxd_rc=$?; __muxd_p=; EMIT "$__muxd_rc"; \builtin eval "$__muxd_L"
//
// where EMIT S is `\builtin printf 'MARK %s\n' S || \builtin printf '%s\n' S >|D/x/x`.
//
// Why each piece:
//   - one loop parsed once: bash reads a pipe one byte per syscall and
//     parses whatever it reads, so a per-command line (even the 26-byte
//     `\builtin eval "$__muxd_w"` this replaced) cost ~25 reads plus a
//     parse of the wrapper, about a third of bash's time per command (measured).
//     Parsed before any user alias exists, its keywords and names cannot
//     be hijacked by aliases; `\builtin` keeps functions named like
//     builtins out (and `((1))`, not `:`).
//   - the command runs in the main shell (a loop is no scope), so cd,
//     export, declare, functions and aliases persist; its text is sourced
//     from a file, so unbalanced quotes, heredocs and syntax errors cannot
//     wedge the parser.
//   - the one-turn `for` keeps the user's break/continue from skipping the
//     marker; `continue 2` still gets it at the top of the loop (the
//     command is pending), a `break 2` that leaves the loop gets it after
//     `done`, and the eval re-enters the loop.
//   - read: IFS= against IFS changes; EOF (Go closed stdin) ends the shell;
//     a signal or TMOUT (status > 128) just reads again.
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
//     and expansions are quoted against IFS changes; every variable read
//     is set, so `set -u` is harmless; errexit ignores `||`/`&&` lists.
//   - the INT trap makes Ctrl-C (session.interrupt) return from the
//     sourced command even in a builtin-only loop; outside a sourced file
//     the `return` fails silently and the marker is still written. It is
//     set again for every command, since the user may change it.
//   - if the pipe is unusable, the exit record file is the fallback,
//     picked up by the exit watcher.
//   - stdin is /dev/null unless bytes were given, so readers get EOF.
func wrapperLine(withStdin bool) string {
	if withStdin {
		return "i\n"
	}
	return "\n"
}

// loopText is the session loop of session dir, with marker token mark
// (letters and digits).
func loopText(dir, mark string) string {
	q := func(name string) string { return shQuote(dir + "/" + name) }
	group := func(in string) string {
		return `for __muxd_i in 1; do { \builtin source ` + q("c") + `;} <` + in + ` >|` + q("o") + ` 2>|` + q("e") + `; done`
	}
	emit := func(status string) string {
		return `\builtin printf '` + mark + ` %s\n' ` + status + `||\builtin printf '%s\n' ` + status + ` >|` + q("x/x")
	}
	return `while ((1)); do ` +
		`[[ -z ${__muxd_p-} ]]||{ __muxd_p=;` + emit("0") + `;};` +
		`IFS= \builtin read -r __muxd_x||{ (($?>128))&&\builtin continue;\builtin exit;};` +
		`\builtin trap '\builtin return 130 2>/dev/null' INT;` +
		`__muxd_p=1;` +
		`if [[ $__muxd_x == i ]]; then ` + group(q("i")) + `; else ` + group("/dev/null") + `; fi;` +
		`__muxd_rc=$?;__muxd_p=;` + emit(`"$__muxd_rc"`) + `;` +
		`done;` +
		`__muxd_rc=$?;__muxd_p=;` + emit(`"$__muxd_rc"`) + `;\builtin eval "$__muxd_L"`
}

// setupLine is the shell's first and last line of shell code: it defines
// the loop (readonly: users cannot unset or change it) and enters it.
// extra runs before the loop (tests break the control pipe with it).
func setupLine(dir, mark, extra string) string {
	return `\builtin readonly __muxd_L=` + shQuote(loopText(dir, mark)) + ";" + extra + `\builtin eval "$__muxd_L"` + "\n"
}

// shQuote quotes s for bash as one word.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// snapshotScript writes the session state to path as a script a fresh
// bash can source: variables and functions first, options last (so
// `set -e` or `set -u` cannot break the restore), cwd at the very end. The
// session's tree mark is left out (in a subshell, so the session keeps
// it): the process keeps its own, whatever the session did to the
// variable, or deleting the session would end the process too. The file
// is written where it will live: never a rename, which fails across
// filesystems.
func snapshotScript(path string) string {
	return "{\n" + snapshotBody + "} >|" + shQuote(path) + "\n"
}

const snapshotBody = `(\builtin export -n ` + proc.MarkVar + ` 2>/dev/null||\builtin :;\builtin export -p)
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
