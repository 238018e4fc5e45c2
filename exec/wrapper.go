package exec

import (
	"strconv"
	"strings"

	"github.com/muxd/muxd/internal/proc"
)

// The session loop. The shell's first input defines readonly variables
// (__muxd_N, the interrupt flag file D/n; __muxd_T, the trap's body, and
// __muxd_D, its unwinding's end; __muxd_R, the undoing of per-command
// overrides; __muxd_L, the loop; __muxd_0, empty, for FATAL) and
// evals __muxd_L: a loop, parsed once, that runs one command per byte it
// reads from stdin: "n" plain, "i" with stdin, "o" with overrides, "b"
// both. With D the session's directory and MARK its token:
//
//	TRAP
//	until ((0)); do until ((0)); do
//	  [[ -z ${__muxd_p-} ]] || { __muxd_p=; \builtin eval "$__muxd_R"; END(0); }
//	  __muxd_x=-; \builtin read -r -N 1 -u 50 __muxd_x || { __muxd_s=$?; ((__muxd_s>128)) && \builtin continue
//	    [[ -p /dev/fd/50 ]] || \builtin exit 98
//	    IFS= \builtin read -r -u 50 -t 0 __muxd_x 2>&52; \builtin exit "$__muxd_s"; FATAL; }
//	  __muxd_p=1
//	  case $__muxd_x${__muxd_n-}${__muxd_b-} in
//	  BRANCHES
//	  -*) FATAL;;
//	  *)  __muxd_n= __muxd_b=; [[ -z ${__muxd_a-} ]] || \builtin eval "$__muxd_D"
//	      if [[ -e $__muxd_N ]]; then __muxd_b=130
//	      else case $__muxd_x in BRANCHES esac; fi;;
//	  esac
//	  END($?)
//	done; POST; done; POST; \builtin eval "$__muxd_L"
//
// where
//
//	BRANCHES  = n) RUN(/dev/null);; i) RUN(D/i);; o) UNDO(/dev/null);; b) UNDO(D/i);;
//	TRAP      = \builtin trap '\builtin eval "$__muxd_T"' INT
//	__muxd_T  = ACK; ARM; \builtin return 130 2>/dev/null || { __muxd_n=1;
//	              [[ -z ${__muxd_p-} || ! -e $__muxd_N ]] || { __muxd_b=130; \builtin break; }; }
//	ACK       = if D/n exists: create D/n.t
//	ARM       = if armed, or D/n exists and set -T was off:
//	            __muxd_d=DEPTH (armed: the least of it and __muxd_d) __muxd_a=1 __muxd_n=1; set -T
//	            trap 'if DEPTH < __muxd_d: __muxd_d=DEPTH; \builtin return 130 2>/dev/null' DEBUG
//	DEPTH     = how many functions and sourced files the shell is in
//	__muxd_D  = __muxd_a=2; trap - DEBUG; set +T; __muxd_a=
//	RUN(I)    = for __muxd_i in 1; do { \builtin source D/c;} <I >|D/o 2>|D/e; done
//	UNDO(I)   = for __muxd_i in 1; do { \builtin source D/c;} <I >|D/o 2>|D/e
//	              __muxd_b=${__muxd_b:-$?} __muxd_p=; done
//	            __muxd_b=${__muxd_b:-$?} __muxd_p=; \builtin eval "$__muxd_R"; __muxd_p=1
//	POST      = __muxd_b=${__muxd_b:-$?} __muxd_p=; [[ ! -e $__muxd_N ]] || __muxd_b=130
//	            \builtin eval "$__muxd_R"; END($?)
//	END(S)    = __muxd_rc=${__muxd_b:-S}; __muxd_p=; TRAP
//	            \builtin printf 'MARK %s %s %s\n' "$__muxd_rc" "$-" "${!-}" >&51 || \builtin printf '%s\n' "$__muxd_rc" >|D/x/x || FATAL
//	FATAL     = { __muxd_e=${__muxd_0:?WORDS};} 2>&52   (ends the shell: see fatal)
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
//   - `until ((0))`, not `while ((1))`: under `set -n` (noexec) every
//     command "succeeds" without running, so `while` spun a CPU for ever
//     while `until` stops, the shell reaches the end of its -c script
//     (setupReader) and exits, and the session dies at once.
//   - the one-turn `for` keeps the user's break/continue from skipping the
//     marker; `continue 2` still gets it at the top of the loop (the
//     command is pending), a `break 2` that leaves the loop gets it after
//     `done` (POST) and the outer loop goes on; a `break 3` or more gets
//     it after the outer loop, and the eval re-enters the loop.
//   - read: one byte (-N 1), which bash never splits on IFS, so the
//     user's IFS cannot change it; a line read needed `IFS= \builtin read`,
//     and a temporary IFS under `builtin` cost ~9 µs of the ~110 µs of
//     bash CPU per command (measured). EOF (Go closed stdin) ends the shell
//     with read's status; a signal or TMOUT (status > 128) just reads
//     again. A command that closed fd 50 ends it too, with lostFDStatus.
//     A read that fails otherwise (`enable -n read`) is tried once more
//     with its error on bash's stderr (fd 52), for the session's dead
//     reason.
//   - fds 0, 1 and 2 are closed in the loop (see setupLine): the
//     command pipe is read from fd 50 and the marker goes to fd 51,
//     bash's close-on-exec copies, so the programs a command starts
//     cannot read commands or write a fake marker. The command's
//     redirections each cost an open and a close, and bash undoes them
//     by closing: the user's `exec >&-` or `exec >file` only touches
//     the group's fds.
//   - MARK is a random per-session token: a subshell the command forks
//     keeps fd 51 (close-on-exec ends only at exec), and what it writes
//     there must not pass for a status.
//   - `>|` writes through `set -o noclobber`; paths are quoted literals
//     and expansions are quoted against IFS changes; every variable read
//     is set, so `set -u` is harmless; errexit ignores `||`/`&&` lists.
//   - the INT trap makes Ctrl-C (session.interrupt) return from the
//     sourced command even in a builtin-only loop. The SIGINT may come
//     before the command began: the shell is still in `read` (Go marks
//     the session busy before it writes the line) or opening the
//     redirections. There `return` fails, so the trap sets __muxd_n, and
//     the interrupt is not lost: the `case` skips the command, or (the
//     command read) the trap breaks out of the `for` or the `while`, and
//     END reports 130 from __muxd_b. Go creates D/n before it signals and
//     removes it once the command is over, so only an interrupt of the
//     command at hand counts: a stray SIGINT to the idle shell, or a late
//     one meant for the previous command, leaves __muxd_n set and the
//     `case` drops it. The common path costs one `case`, which replaced
//     an `if [[ ]]`. A `break` from a trap lets the command it ran before
//     go on (with the DEBUG trap armed, that may be the `*)` branch
//     clearing __muxd_b), so the way out after `done` checks D/n again.
//   - the interrupt ends the whole command, not only the innermost
//     function or sourced file it lands in: see trapText.
//   - the trap is set again after every command, since the user may
//     change it, and after rather than before it: bash can lose a signal
//     that comes while `trap` replaces the handler. Its string is short
//     (its body is in __muxd_T): bash's `trap` costs ~5 µs more per
//     command for the ~130-byte body inline (measured).
//   - per-command cwd and env (overrideScript) are undone by the loop
//     (__muxd_R, after the command), not by the sourced file: the trap
//     returns from a sourced file wherever it lands in it, and an undo
//     there could be skipped. With the pending mark cleared first, the
//     trap neither breaks out of the undo nor changes the status.
//   - $- in the marker tells Go whether job control (set -m) is on, and
//     $! the last background job the shell started; see
//     session.interrupt.
//   - if the pipe is unusable, the exit record file is the fallback,
//     picked up by the exit watcher.
//   - stdin is /dev/null unless bytes were given, so readers get EOF.
func wrapperLine(withStdin, overrides bool) string {
	switch {
	case withStdin && overrides:
		return "b"
	case withStdin:
		return "i"
	case overrides:
		return "o"
	}
	return "n"
}

// loopText is the session loop of session dir, with marker token mark
// (letters and digits).
func loopText(dir, mark string) string {
	q := func(name string) string { return shQuote(dir + "/" + name) }
	trap := `\builtin trap '\builtin eval "$__muxd_T"' INT`
	source := func(in string) string {
		return `{ \builtin source ` + q("c") + `;} <` + in + ` >|` + q("o") + ` 2>|` + q("e")
	}
	run := func(in string) string {
		return `for __muxd_i in 1; do ` + source(in) + `; done`
	}
	// With overrides, the command's status goes to __muxd_b and the
	// pending mark is cleared before the restore, so the trap neither
	// breaks out of it nor changes the status (see the comment above).
	runUndo := func(in string) string {
		return `for __muxd_i in 1; do ` + source(in) + `;__muxd_b=${__muxd_b:-$?} __muxd_p=; done;` +
			`__muxd_b=${__muxd_b:-$?} __muxd_p=;\builtin eval "$__muxd_R";__muxd_p=1`
	}
	branches := `n) ` + run("/dev/null") + `;; i) ` + run(q("i")) + `;; ` +
		`o) ` + runUndo("/dev/null") + `;; b) ` + runUndo(q("i")) + `;; `
	// A read that "succeeded" without reading (a function named read or
	// builtin) leaves the "-" put there before it.
	unread := `-*) ` + fatal(noReadWords) + `;; `
	end := func(status string) string {
		return `__muxd_rc=${__muxd_b:-` + status + `};__muxd_p=;` + trap + `;` +
			`\builtin printf '` + mark + ` %s %s %s\n' "$__muxd_rc" "$-" "${!-}" >&51||\builtin printf '%s\n' "$__muxd_rc" >|` + q("x/x") +
			`||` + fatal(noMarkerWords)
	}
	// After a break out of the command loop (the trap's, or the user's
	// break 2), the command's end, then the loop again: from an outer
	// loop, so that only a break 3 or more re-enters through eval, one
	// level deeper each time.
	post := `__muxd_b=${__muxd_b:-$?} __muxd_p=;[[ ! -e $__muxd_N ]]||__muxd_b=130;\builtin eval "$__muxd_R";` + end("$?")
	return trap + `;until ((0)); do until ((0)); do ` +
		`[[ -z ${__muxd_p-} ]]||{ __muxd_p=;\builtin eval "$__muxd_R";` + end("0") + `;};` +
		`__muxd_x=-;\builtin read -r -N 1 -u 50 __muxd_x||{ __muxd_s=$?;((__muxd_s>128))&&\builtin continue;` +
		`[[ -p /dev/fd/50 ]]||\builtin exit ` + strconv.Itoa(lostFDStatus) + `;IFS= \builtin read -r -u 50 -t 0 __muxd_x 2>&52;\builtin exit "$__muxd_s";` +
		fatal(noReadWords) + `;};` +
		`__muxd_p=1;` +
		`case $__muxd_x${__muxd_n-}${__muxd_b-} in ` + branches + unread +
		`*) __muxd_n= __muxd_b=;[[ -z ${__muxd_a-} ]]||\builtin eval "$__muxd_D";if [[ -e $__muxd_N ]]; then __muxd_b=130;` +
		`else case $__muxd_x in ` + branches + `esac;fi;; ` +
		`esac;` +
		end("$?") + `;` +
		`done;` + post + `;done;` + post + `;\builtin eval "$__muxd_L"`
}

// fatal ends the shell with words on its stderr (fd 52, for the dead
// session's reason) where the loop cannot go on: it needs `builtin`,
// `read` and `printf`, and a function of that name or `enable -n` takes
// them away. Ending the shell is all that is left then, and an expansion
// error ends a non-interactive bash whatever functions, aliases or
// disabled builtins it has (__muxd_0 is readonly and empty). Without it
// the loop waited for ever, or ran the last command again and again.
func fatal(words string) string {
	return `{ __muxd_e=${__muxd_0:?` + words + `};} 2>&52`
}

// The words of fatal, after bash's "__muxd_0: ": plain words, since they
// stand unquoted in the loop text.
const (
	noReadWords   = "the session loop cannot read commands: a function or enable -n hides a builtin it needs (builtin, read)"
	noMarkerWords = "the session loop cannot report command ends: a function or enable -n hides a builtin it needs (builtin, printf)"
)

// restoreText undoes what an override script (overrideScript) recorded,
// newest first: each variable comes back with its value and export
// attribute, or unset, and the directory with PWD and OLDPWD. It runs in
// the loop, not in a sourced file, so the INT trap cannot return from
// it; where the user's break 2 or continue 2 skipped the command's UNDO,
// the loop runs it on the way (it has nothing to do otherwise).
const restoreText = `__muxd_j=${#__muxd_v[@]};` +
	`while ((__muxd_j>0)); do __muxd_j=$((__muxd_j-1));` +
	`case ${__muxd_w[__muxd_j]-} in ` +
	`'') \builtin unset "${__muxd_v[__muxd_j]}";; ` +
	`*x*) \builtin export "${__muxd_v[__muxd_j]}=${__muxd_u[__muxd_j]-}";; ` +
	`*) \builtin export -n "${__muxd_v[__muxd_j]}";\builtin printf -v "${__muxd_v[__muxd_j]}" %s "${__muxd_u[__muxd_j]-}";; ` +
	`esac;done;` +
	`[[ -z ${__muxd_wd-} ]]||{ \builtin cd -- "$__muxd_wd";` +
	`if [[ -n ${__muxd_os-} ]]; then OLDPWD=$__muxd_od;else \builtin unset OLDPWD;fi;};` +
	`__muxd_v=() __muxd_w=() __muxd_u=() __muxd_wd= __muxd_od= __muxd_os=`

// trapText is what the INT trap runs outside a sourced command (see
// wrapper.go's top comment). It lives in a readonly variable: the trap
// string stays short, and bash's `trap` costs more per byte of it than
// the rest of the loop does.
//
// It first acknowledges an interrupt from muxd (D/n.t): Go then knows
// the shell has it (see session.recheckInterrupt).
//
// `return` leaves only the innermost function or sourced file, and its
// caller would go on with its next command (a loop calling a function
// would never end). So the trap also arms an unwinding: it turns
// functrace on (set -T) and sets a DEBUG trap that returns before the
// next command of each enclosing function and sourced file, so each
// returns in turn. It returns only where the shell is shallower than
// where it last returned (__muxd_d): inside the trap itself, in a RETURN
// trap (which runs at the depth of its function) and in what a RETURN
// trap calls, it does nothing, so a function's cleanup runs whole (a
// `return` there would return from the same function again, which ran
// its RETURN trap again: bash spun). At the loop's level `return` fails
// and the DEBUG trap does nothing. The loop disarms it (disarmText)
// before the next command, in the `*)` branch (the trap sets __muxd_n).
//
// Bash runs a pending trap before any command, also inside a trap, so a
// second SIGINT may run this text again between any two of its commands,
// and its `return` may abandon the first run. So arming is idempotent
// (an interrupt in a RETURN trap's cleanup keeps the depth the unwinding
// reached, or the DEBUG trap would return inside the RETURN trap),
// its decision and its mark are single commands, and it saves nothing:
// __muxd_a is 1 while armed (or arming) and 2 while disarming, when
// arming again is not allowed.
//
// Arming needs an interrupt from muxd (D/n: a stray SIGINT, say from a
// user's kill -INT 0, only returns from where it lands) and functrace
// off: a shell with set -T on (the user's own DEBUG or RETURN traps) is
// left alone, and there the interrupt returns from the innermost
// function or sourced file only. A DEBUG trap set
// without set -T never runs for the user's commands (bash keeps it out
// of sourced files); an interrupt clears it.
const trapText = `[[ ! -e $__muxd_N ]]||\builtin : 2>/dev/null >|"$__muxd_N.t"||\builtin :;` +
	`[[ ${__muxd_a-} == 1 || -z ${__muxd_a-} && $- != *T* && -e $__muxd_N ]]&&` +
	`{ __muxd_d=$((${__muxd_a:-0}==1&&__muxd_d<` + depthExpr + `?__muxd_d:` + depthExpr + `)) __muxd_a=1 __muxd_n=1;\builtin set -T;` +
	`\builtin trap '((` + depthExpr + `<__muxd_d))&&{ __muxd_d=$((` + depthExpr + `));\builtin return 130 2>/dev/null||\builtin :;}||\builtin :' DEBUG;};` +
	`\builtin return 130 2>/dev/null||{ __muxd_n=1;[[ -z ${__muxd_p-}||! -e $__muxd_N ]]||{ __muxd_b=130;\builtin break;};}`

// depthExpr is how deep the shell is in functions and sourced files
// (0 at the top), for arithmetic, and with set -u too.
const depthExpr = `${BASH_SOURCE[@]+${#BASH_SOURCE[@]}}+0`

// disarmText ends the unwinding that trapText armed. If an interrupt
// breaks out of it, __muxd_a stays set and the loop runs it again before
// the next command.
const disarmText = `__muxd_a=2;\builtin trap - DEBUG;\builtin set +T;__muxd_a=`

// lostFDStatus is the shell's exit status when a command closed fd 50,
// the loop's command pipe; badSetupStatus when the setup could not put
// bash's copies at fds 50-52 (a bash that numbers them otherwise, or a
// descriptor limit under 53).
const (
	lostFDStatus   = 98
	badSetupStatus = 97
)

// setupLine is the shell's only shell code besides the command files,
// read by setupReader: it defines the loop (readonly: users cannot unset
// or change it) and enters it. extra runs before the loop (tests break
// the control pipe with it).
//
// The loop runs in a group that closes fds 0, 1 and 2: redirecting a
// closed fd costs bash an open and a close, where an open one costs ten
// syscalls (save, close-on-exec, dup2, restore), and the three per
// command were about a third of bash's time. Bash keeps the originals
// (command pipe, control pipe, its stderr) in close-on-exec copies at the
// lowest free fds from 10 up. The setup fills 10-49 with /dev/null first
// (and frees 50-52 of strays a daemon may pass down), so the copies land
// at 50, 51 and 52, and the group closes the fillers: fds 10 and up stay
// the user's (`exec 10>lock`, `{fd}>file`), which bash would otherwise
// refuse to replace or hand out from under the loop. Programs the
// commands start inherit only what the group gives them. The shell
// exits at start with badSetupStatus if the copies are not there, or if
// bash could not make them (the group never runs; the loop never
// returns from it).
func setupLine(dir, mark, extra string) string {
	return `\builtin unset -v __muxd_S;__muxd_v=() __muxd_w=() __muxd_u=();\builtin readonly __muxd_0= __muxd_N=` + shQuote(dir+"/n") + ` __muxd_T=` + shQuote(trapText) + ` __muxd_D=` + shQuote(disarmText) +
		` __muxd_R=` + shQuote(restoreText) + ` __muxd_L=` + shQuote(loopText(dir, mark)) + ";" +
		extra + `for __muxd_i in {10..49}; do \builtin eval "\command exec $__muxd_i</dev/null";done;\command exec 50<&- 51<&- 52<&-;` +
		`{ for __muxd_i in {10..49}; do \command exec {__muxd_i}<&-;done;[[ -p /dev/fd/50 ]]||\builtin exit ` + strconv.Itoa(badSetupStatus) + `;\builtin eval "$__muxd_L";} <&- >&- 2>&-;\builtin exit ` + strconv.Itoa(badSetupStatus) + "\n"
}

// setupReader is the shell's -c script: it reads the setup (setupLine,
// NUL-terminated) from the command pipe and runs it. The shell runs a
// script given with -c, not what it reads from stdin, so it exits when
// the loop ends: the loop only ends under `set -n` (noexec), where every
// command "succeeds" without running, so the `until ((0))` loops stop
// instead of spinning a CPU for ever, and the session dies at once.
const setupReader = `IFS= \builtin read -r -d '' __muxd_S;\builtin eval "$__muxd_S"`

// shQuote quotes s for bash as one word.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// snapshotScript writes the session state to path as a script a fresh
// bash can source. The order matters there:
//   - exports, umask and shopt first (extglob must be on before the
//     functions that use it are parsed), then the cwd, then functions,
//     aliases and set options last: until the functions no user function
//     or alias exists to hijack a restore command (a `cd` function,
//     `alias set=…`), and set -e or set -u cannot break the restore.
//   - after the functions, the aliases go as an assignment to
//     BASH_ALIASES and the options as `\builtin set …`, since a function
//     may be named `alias` or `set`; the aliases after the functions, so
//     an alias cannot rewrite a function's definition.
//   - the session's tree mark is left out (in a subshell, so the session
//     keeps it): the process keeps its own, whatever the session did to
//     the variable, or deleting the session would end the process too.
//   - an unset PWD (set -u; unset PWD) must not end the session's shell:
//     `\builtin pwd` then.
//   - `set +o` runs in a command substitution, where bash clears -e: $-
//     says whether it is on.
//
// The file is written where it will live: never a rename, which fails
// across filesystems.
func snapshotScript(path string) string {
	return "{\n" + snapshotBody + "} >|" + shQuote(path) + "\n"
}

const snapshotBody = `(\builtin export -n ` + proc.MarkVar + ` 2>/dev/null||\builtin :;\builtin export -p)
\builtin umask -p
\builtin shopt -p
__muxd_o=${PWD:-$(\builtin pwd)}; \builtin printf '\\builtin cd -- %q||__muxd_nocd=%q\n' "$__muxd_o" "$__muxd_o"
\builtin declare -f
__muxd_o=$(\builtin declare -p BASH_ALIASES); \builtin printf '%s\n' "${__muxd_o#declare -A }"
__muxd_o=$(\builtin set +o); \builtin printf '\\builtin %s\n' "${__muxd_o//$'\n'/$'\n'\\builtin }"; \builtin unset __muxd_o
[[ $- != *e* ]] || \builtin printf '\\builtin set -e\n'
`

// stateScript writes the cwd and the exported environment,
// NUL-separated, to path. env is the env program by its absolute path:
// the user's PATH may no longer find it (export PATH=/opt/bin), and a
// state without variables would start a terminal with an empty
// environment. When env fails (a variable over 128 KiB), a last \001
// field says so. env runs in a subshell: under set -e, bash 5.2 ends
// the shell when `builtin command` fails to exec, even on the left of
// ||, and a terminal.create from a session killed the session.
func stateScript(path, env string) string {
	return `{ \builtin printf '%s\0' "${PWD:-$(\builtin pwd)}"; (\builtin command ` + shQuote(env) + ` -0)||\builtin printf '\001\0';} >|` + shQuote(path) + "\n"
}

// parseMarker parses "STATUS\n", an exit record or a marker's status.
func parseMarker(line string) (status int, ok bool) {
	st, err := strconv.Atoi(strings.TrimSpace(line))
	return st, err == nil
}
