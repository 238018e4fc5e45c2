// Package mux implements wsmux/1, the muxd wire protocol (docs/protocol.md):
// one WebSocket carries a control channel for JSON-RPC and many byte
// channels, each with its own credit window in each direction.
//
// Both ends use the same [Conn]. A server calls [Accept] from an HTTP
// handler with a [Router] that holds the RPC methods and the channel
// kinds; a client calls [Dial], then [Conn.Call] and [Conn.Open].
//
// Each Conn runs one reader and one writer goroutine. The reader never
// blocks on a consumer: inbound DATA lands in the channel's buffer (bounded
// by the credit granted), RPC requests run on worker goroutines (a few are
// kept per connection) within per-class caps, and write their responses
// themselves when the socket is idle. The writer sends frames FIFO within a channel and by
// class between channels: WINDOW, PONG and small RPC messages first, then
// terminal channels, then process channels and large RPC messages,
// round-robin within a class. Output is buffered only when ready to send,
// at most one DATA frame per channel, within Config.ConnBudget.
//
// A [Channel] is an io.ReadWriter. Read returns credit to the peer after
// the bytes were taken; sinks that must confirm consumption (a PTY write)
// use ReadNoCredit and Consumed. Write blocks for credit. Channel methods
// may be called from any goroutine, but Write calls on one channel should
// come from one goroutine, or their frames interleave.
package mux
