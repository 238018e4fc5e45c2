// Package client is the Go client of muxd for agent harnesses: commands,
// sessions, processes and terminals over one WebSocket (wsmux/1).
//
// A [Client] reconnects by itself when the socket drops. Resources live
// in the daemon, not in the socket, so work goes on across a reconnect:
// an [Client.Exec] whose socket dropped fetches its result by id, a
// create ([Client.StartProcess], [Client.CreateSession],
// [Client.CreateTerminal]) whose answer was lost returns what it made,
// found by its id (sent again only if nothing has it), and the readers of [Process.Stdout], [Process.Stderr] and [Terminal] resume at
// the byte where they stopped, with no gap and no duplicate. A daemon
// that shuts down (SIGTERM, docker stop) ends its resources and fails
// the calls and reads in flight with its GOAWAY error (errors.Is(err,
// [mux.ErrGoAway])). Once it restarted (a new boot id), calls on the old
// resources fail with not_found. A daemon that stays out of reach
// (it died) fails the calls waiting for it with [ErrUnreachable] after
// [Options.Unreachable] (a minute by default), never hangs them.
//
// All methods are safe for concurrent use, except that each reader
// (Stdout, Stderr, a Terminal's Read) should be read by one goroutine.
package client
