package pty

import (
	"log/slog"
	"time"
)

// Config tunes a Manager. The zero value of a field means its default.
type Config struct {
	// RingSize is the retained output per terminal in bytes (default
	// 1 MiB): what a reattaching client can replay, and how far an
	// attachment may fall behind before it holds the PTY back.
	RingSize int
	// MaxTerminals caps live and exited terminals held (default 256), so a
	// client cannot exhaust PTYs and memory (RingSize each).
	MaxTerminals int
	// DefaultShell is the shell when CreateOptions.Shell is empty (default:
	// the user's login shell from /etc/passwd, else bash).
	DefaultShell string
	// StallTimeout is how long an attachment that stopped pulling may hold
	// the PTY reader back before it is left behind (default 2 s).
	StallTimeout time.Duration
	// KillGrace is how long destroy waits after SIGHUP before SIGKILL
	// (default 1 s).
	KillGrace time.Duration
	// DrainTimeout bounds how long output is still read after the shell
	// exited while a leftover process keeps the PTY open (default 200 ms).
	DrainTimeout time.Duration
	// Logger receives one line per terminal lifecycle event (default
	// slog.Default()).
	Logger *slog.Logger
	// OnCreate and OnExit, when set, are called (without locks held, from
	// the goroutine that created the terminal or from its reader) when a
	// terminal is created and when its shell exits; for notifications.
	OnCreate func(Info)
	OnExit   func(Info)
}

const (
	defaultRingSize     = 1 << 20 // 1 MiB
	defaultMaxTerminals = 256
	defaultStall        = 2 * time.Second
	defaultKillGrace    = time.Second
	defaultDrain        = 200 * time.Millisecond
	// readChunk is the PTY read size; Linux returns at most ~4 KiB per
	// read of a PTY master, so larger buffers only help after a stall.
	readChunk = 32 << 10 // 32 KiB
	// MaxSize is the largest cols or rows accepted.
	MaxSize = 1000
)

// DefaultConfig returns the defaults spelled out.
func DefaultConfig() Config {
	return Config{
		RingSize:     defaultRingSize,
		MaxTerminals: defaultMaxTerminals,
		StallTimeout: defaultStall,
		KillGrace:    defaultKillGrace,
		DrainTimeout: defaultDrain,
		Logger:       slog.Default(),
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.RingSize <= 0 {
		c.RingSize = d.RingSize
	}
	if c.RingSize < 2*readChunk {
		c.RingSize = 2 * readChunk
	}
	if c.MaxTerminals <= 0 {
		c.MaxTerminals = d.MaxTerminals
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = d.StallTimeout
	}
	if c.KillGrace <= 0 {
		c.KillGrace = d.KillGrace
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = d.DrainTimeout
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}
