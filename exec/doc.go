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
//     by [Engine.ListProcesses].
//   - [Engine.StartProcess] starts a command and returns as soon as it
//     runs. From a session it starts from a snapshot of the session's state
//     (cwd, exported variables, functions, aliases, options, umask) taken
//     under the session lock, in a fresh bash: never as `cmd &` inside the
//     session shell.
//   - Sessions ([Engine.CreateSession]) are long-lived `bash --noprofile
//     --norc` fed through a stdin pipe. Commands run one at a time, in
//     arrival order; sessions run in parallel.
//
// # Completion
//
// A session command runs as `{ source FILE; } <in >|out 2>|err 3>&-` in the
// main shell, followed by a `\builtin printf` of a nonce and `$?` to fd 3,
// a pipe read by the engine (the in-band marker: tens of microseconds). If
// that write fails (the user broke fd 3), the wrapper writes an exit record
// file with a builtin redirect, which the exit watcher (fsnotify plus a
// polling fallback) picks up. If the shell itself ends (`exit 7`,
// `set -e; false`, `${X:?}`), the engine sees the shell's exit through its
// pidfd, returns the command's result and marks the session dead. EOF on an
// output pipe is never a completion signal: a command that leaves
// `sleep 100 &` running still completes.
//
// Each command gets fresh output FIFOs. When the marker arrives, the engine
// reads what is already buffered in them (non-blocking, to EAGAIN) and then
// closes them, so the exit is never reported before the command's output,
// and the later output of background jobs never leaks into the next result.
//
// # Output logs
//
// Each stream of each process is an [outputLog]: a ring file in the data
// directory holding the last OutputLimit bytes, addressed by absolute byte
// offsets from 0. Readers that fall behind the retained window get a
// [*GapError]. Followers are woken by the appender, never by polling.
//
// # Children
//
// Every child is spawned through internal/proc (own process group, default
// signal dispositions, clean environment) and killed as a whole tree.
//
// # Concurrency
//
// All Engine methods are safe for concurrent use. Kill, interrupt and list
// never wait for a session lock.
package exec
