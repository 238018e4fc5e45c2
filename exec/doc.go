// Package exec is muxd's exec engine: stateless commands, persistent bash
// sessions and lifecycle-managed processes, each with a byte-offset output
// log that can be read as a slice or followed live.
//
// # Surfaces
//
//   - [Engine.Exec] runs one command. Without a session it is a fresh
//     `bash -c`; with a SessionID it runs in that session's shell, so `cd`,
//     `export`, functions and aliases persist. Every exec is also a process
//     record: its output can be followed by ID while it runs and read after
//     it ends ([Engine.OpenOutput], [Engine.ReadOutput]); it is not listed
//     by [Engine.ListProcesses] and emits no events.
//   - [Engine.StartProcess] starts a command and returns as soon as it
//     runs. From a session it starts from a snapshot of the session's state
//     (cwd, exported variables, functions, aliases, options, umask) taken
//     in the session's turn, in a fresh bash: never as `cmd &` inside the
//     session shell, and it outlives the session.
//   - Sessions ([Engine.CreateSession]) are long-lived `bash --noprofile
//     --norc` fed through a stdin pipe. Commands run one at a time, in
//     arrival order (a FIFO lock); sessions run in parallel. Kill,
//     interrupt and list never wait for a session's turn.
//
// # Session commands and completion
//
// The session shell runs a loop, parsed once at start, that reads one
// short line per command from the command pipe (see wrapper.go). A session
// command's text goes to the session's command file (fixed paths per
// session, rewritten in place on tmpfs), which the loop sources as a group
// command in the main shell, with stdout and stderr on the
// session's output FIFOs and stdin from /dev/null (or a file of the given
// bytes); then `\builtin printf` writes `$?` to the control pipe, which
// the engine reads (the in-band marker) straight from the
// goroutine that runs the command: ppoll for the first 2 ms, then read
// deadlines for timeouts, cancellation and the lazy drains. No hand-off on
// the hot path, and no goroutine per idle session. The wrapper is
// explained in wrapper.go; it survives aliases and functions named like
// builtins, noclobber, nounset, xtrace, `exec >&-`, `exec 3>&-`, IFS
// changes and user INT traps. The loop runs with fds 0-2 closed and the
// two pipes in bash's close-on-exec copies at fds 50 and 51, which makes
// each redirection of a command an open and a close; programs the
// command starts inherit only fds 0-2. A command that closes fd 50 ends
// the session (with a reason that says so).
//
// The FIFOs are reused while no writer outlives its command; one that a
// background job still holds is replaced by a fresh FIFO at the same path
// and drained to nowhere.
//
// Why the marker and not the seed's exit file: an exit file written with
// tmp + `mv` costs a fork (~1 ms) and its 50 ms poll far more; the marker
// is a builtin write on a pipe already open. The exit record stays as the
// durable fallback: if the marker cannot be written, the wrapper writes
// "STATUS\n" to an exit file with a builtin redirect, picked up by the
// exit watcher (fsnotify, plus polling that works alone; see exitwatch.go).
// If the shell itself ends (`exit 7`, `set -e; false`, `${X:?}`, `exec`),
// its pidfd says so (even while a background subshell holds the pipe):
// the command gets the shell's status and the session is dead with
// bash's last words. EOF on an output pipe is never a
// completion signal: a command that leaves `sleep 100 &` running still
// completes.
//
// When the marker arrives, every byte the command wrote is in its FIFOs:
// the engine reads them to EAGAIN (commands shorter than 2 ms without any
// goroutine; longer ones through drain goroutines started at 2 ms), so an
// exit is never reported before its output. Background jobs that still
// hold a FIFO are drained to nowhere until they close it, so their later
// output never reaches another command's result and they never block.
//
// session.interrupt is SIGINT to the shell's process group, and to the
// groups that the command's own children made for themselves (GNU timeout
// does: a terminal's Ctrl-C reaches it as the foreground job); the
// wrapper's INT trap ends the whole command with 130, loops of builtins
// and the functions and sourced files it is in included (unless the
// user turned functrace on: then the innermost one returns), and the
// shell keeps its state. An interrupt that reaches the shell before it
// began the command is not lost: a flag file says the SIGINT was meant
// for it, and the wrapper skips the command with 130. Nor is one that
// comes while bash forks: bash blocks signals then, so the child it is
// forking misses the SIGINT and the shell would wait for it; until the
// trap acknowledges the interrupt, what the shell forked right after it
// went gets a SIGINT of its own, and so does a child that was still
// inside its fork (bash 5.2 can lose the signal there) once it exec'd.
// And a shell that livelocks on the SIGINT
// (bash's handler raising it again forever, spinning; the child it
// waited for left a zombie) is ended, with that reason, rather than hang
// the command. A
// function's RETURN trap (its cleanup) runs on the way out.
//
// # Output logs
//
// Each stream of each process is an outputLog: a ring file in the data
// directory holding the last OutputLimit bytes, addressed by absolute byte
// offsets from 0, created on the first byte. Readers that fall behind the
// retained window get a [*GapError]; followers are woken by the appender,
// never by polling. Ended records keep no descriptors open. Retention drops
// the oldest ended records past RetainCount or RetainBytes.
//
// # Children
//
// Every child is spawned through internal/proc (own process group, default
// signal dispositions, clean environment) and killed as a whole tree
// (stopped first, TERM, KILL after the grace). Stateless children get
// pipes; the engine records their exit only after the child was reaped and
// the pipes were read to what they hold.
//
// # Files
//
// DataDir holds output logs. RuntimeDir (tmpfs by default) holds the small
// per-command files of sessions. Close kills every tree and removes both.
package exec
