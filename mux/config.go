package mux

import "time"

// Config holds the knobs of one connection. Both ends use it; the server
// advertises the relevant ones in its HELLO [Limits]. Start from
// [DefaultConfig] and change what you need.
type Config struct {
	// MaxFrame is the largest DATA payload in bytes (default 32 KiB). It
	// bounds the latency a keystroke waits behind one bulk frame.
	MaxFrame int
	// MaxChannels is the number of open channels per connection past
	// which OPEN fails with limit_reached (default 1024).
	MaxChannels int
	// MaxRPCRequest is the largest JSON-RPC request in bytes (default
	// 1 MiB); with MaxFrame it sets the server's read limit.
	MaxRPCRequest int
	// MaxRPCResponse is the largest JSON-RPC response in bytes (default
	// 4 MiB); a client sizes its read limit from the server's value.
	MaxRPCResponse int
	// MaxRPCInflight is the number of unanswered short requests per
	// connection past which a short request gets busy at once (default 32).
	MaxRPCInflight int
	// MaxLongInflight is the same cap for long requests (exec, waits),
	// kept apart so a client waiting on many things can still kill and
	// list (default 256).
	MaxLongInflight int
	// InputWindow is the DATA credit in bytes granted to the peer per
	// writable channel (default 64 KiB): enough for a paste. Channels
	// opened once grants fill half of ConnBudget get 4 KiB, and none once
	// they would reach three quarters, so many channels stay within it.
	InputWindow int
	// ConnBudget bounds the bytes one connection may hold in memory:
	// queued output frames, RPC bodies in flight and the input credit
	// granted to the peer (default 16 MiB). Input grants use at most
	// three quarters; queued output keeps at least a quarter.
	ConnBudget int64
	// PingInterval is the period of WebSocket pings (default 15 s); a
	// peer that answers none within two intervals is dropped, so a
	// vanished peer ends waits with an error. Negative disables pings.
	PingInterval time.Duration
	// WriteStallTimeout ends the connection when one socket write has
	// not completed for this long (default 30 s): the peer stopped
	// reading, and everything it holds is freed.
	WriteStallTimeout time.Duration
	// HandshakeTimeout bounds the wait for the peer's HELLO (default 10 s).
	HandshakeTimeout time.Duration
	// CloseTimeout bounds the WebSocket close handshake (default 2 s);
	// after it the socket is dropped.
	CloseTimeout time.Duration
	// LimitNames says where an operator changes a limit, keyed by its
	// HELLO name ("maxChannels", "maxRpcRequest", "maxRpcResponse"); a
	// refusal at that limit ends with it in parentheses. The daemon
	// names its flags ("muxd serve --max-channels"); empty, refusals
	// name only the limit. Busy answers keep their exact words, which
	// clients match (IsOverload) to retry.
	LimitNames map[string]string
}

// limitHint is " (where)" for the limit named, or "".
func (c Config) limitHint(limit string) string {
	if w := c.LimitNames[limit]; w != "" {
		return " (" + w + ")"
	}
	return ""
}

// DefaultConfig returns the defaults of the protocol (docs/protocol.md).
func DefaultConfig() Config {
	return Config{
		MaxFrame:          32 << 10, // 32 KiB
		MaxChannels:       1024,
		MaxRPCRequest:     1 << 20, // 1 MiB
		MaxRPCResponse:    4 << 20, // 4 MiB
		MaxRPCInflight:    32,
		MaxLongInflight:   256,
		InputWindow:       64 << 10, // 64 KiB
		ConnBudget:        16 << 20, // 16 MiB
		PingInterval:      15 * time.Second,
		WriteStallTimeout: 30 * time.Second,
		HandshakeTimeout:  10 * time.Second,
		CloseTimeout:      2 * time.Second,
	}
}

// withDefaults fills zero fields from DefaultConfig, so a partly filled
// Config works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxFrame <= 0 {
		c.MaxFrame = d.MaxFrame
	}
	if c.MaxChannels <= 0 {
		c.MaxChannels = d.MaxChannels
	}
	if c.MaxRPCRequest <= 0 {
		c.MaxRPCRequest = d.MaxRPCRequest
	}
	if c.MaxRPCResponse <= 0 {
		c.MaxRPCResponse = d.MaxRPCResponse
	}
	if c.MaxRPCInflight <= 0 {
		c.MaxRPCInflight = d.MaxRPCInflight
	}
	if c.MaxLongInflight <= 0 {
		c.MaxLongInflight = d.MaxLongInflight
	}
	if c.InputWindow <= 0 {
		c.InputWindow = d.InputWindow
	}
	if c.ConnBudget <= 0 {
		c.ConnBudget = d.ConnBudget
	}
	if c.PingInterval == 0 {
		c.PingInterval = d.PingInterval
	}
	if c.WriteStallTimeout <= 0 {
		c.WriteStallTimeout = d.WriteStallTimeout
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = d.CloseTimeout
	}
	return c
}

// Limits is the "limits" object of the server's HELLO.
type Limits struct {
	MaxFrame       int `json:"maxFrame"`
	MaxChannels    int `json:"maxChannels"`
	MaxRPCRequest  int `json:"maxRpcRequest"`
	MaxRPCResponse int `json:"maxRpcResponse"`
	MaxRPCInflight int `json:"maxRpcInflight"`
	InputWindow    int `json:"inputWindow"`
}

// Limits returns the HELLO limits this Config advertises.
func (c Config) Limits() Limits {
	c = c.withDefaults()
	return Limits{
		MaxFrame:       c.MaxFrame,
		MaxChannels:    c.MaxChannels,
		MaxRPCRequest:  c.MaxRPCRequest,
		MaxRPCResponse: c.MaxRPCResponse,
		MaxRPCInflight: c.MaxRPCInflight,
		InputWindow:    c.InputWindow,
	}
}

// readLimit is the server's WebSocket read limit of docs/protocol.md.
func (c Config) serverReadLimit() int64 {
	return int64(max(c.MaxRPCRequest, c.MaxFrame)) + headerLen
}
