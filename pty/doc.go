// Package pty runs terminals: a shell on a pseudo-terminal whose output is
// kept in a replay ring with absolute byte offsets, and which any number of
// attachments may read and type into.
//
// A [Terminal] outlives its attachments. Its output is read by one goroutine
// into a ring (1 MiB by default); every byte has an absolute offset counted
// from the terminal's first output byte, so a client that saw bytes up to N
// resumes at N without duplicates. An [Attachment] pulls events with
// [Attachment.Next]: an optional gap (the bytes it asked for are gone),
// replayed bytes, a sync event giving the offset of the first live byte,
// live bytes (with a gap whenever it fell out of the ring), and finally the
// exit status.
//
// Replay starts on a UTF-8 and escape-sequence boundary, and terminal
// queries (DA, DSR/CPR, DECRQM, XTVERSION, OSC colour queries, DECRQSS,
// XTGETTCAP, window reports) are dropped from replayed bytes: a fresh xterm
// would answer them and the answers would be typed into the shell. A
// replay that starts after lost output first sets the terminal modes in
// effect there (alternate screen, key and mouse modes: the ring follows
// what it overwrites with internal/termmodes), and asks a full-screen
// program still drawing to redraw with SIGWINCH.
//
// Backpressure: an attachment that stops pulling holds the PTY reader back
// only while it is less than a ring's worth behind and for at most
// [Config.StallTimeout] (2 s by default); after that it no longer counts,
// falls behind in the ring, and skips ahead with a gap when the ring
// overwrites what it has not read. Nothing is lost while attachments keep
// up, and a stalled viewer never freezes the program or the other viewers
// for longer than the bound. No lock is held while writing to the PTY or
// while a consumer writes what it pulled.
//
// Input: [Terminal.Write] and [Attachment.Write] go straight to the PTY
// when it takes the bytes at once; otherwise they queue behind a
// per-terminal writer and wait, until written, their context ends, or the
// attachment is detached, so a program that stops reading its input never
// pins a caller. Writes are never interleaved. Resize is latest-wins and
// never blocks.
//
// Children are started through internal/proc: the shell is a session leader
// with the PTY slave as its controlling terminal, and destroying a terminal
// kills its whole process tree.
package pty
