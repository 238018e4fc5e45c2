package exec

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Config tunes an [Engine]. Zero fields take the defaults of
// [DefaultConfig].
type Config struct {
	// DataDir holds output logs, command files, FIFOs and exit records.
	// Created if missing; its contents are removed by Close.
	DataDir string
	// RuntimeDir holds the sessions' small per-command files (command
	// text, FIFOs, exit records). Default: a fresh directory on /dev/shm
	// when it is a writable tmpfs, else DataDir/s. On a disk filesystem
	// each command's file creations cost several times more (measured on
	// ext4: ~2x the session round trip).
	RuntimeDir string
	// Shell is the bash binary for sessions and commands ("bash").
	Shell string
	// BaseEnv is the environment children start from (os.Environ());
	// internal/proc strips MUXD_*, BASH_ENV and ENV from it.
	BaseEnv []string
	// MaxSessions caps live sessions (64): each is a bash process.
	MaxSessions int
	// MaxProcesses caps running processes and execs (1024).
	MaxProcesses int
	// RetainCount caps ended processes and exec records kept (256); the
	// oldest ended are dropped first.
	RetainCount int
	// RetainBytes caps the output retained by ended records (1 GiB).
	RetainBytes int64
	// DefaultOutputLimit is the per-stream retained output of a process
	// (64 MiB); older bytes are dropped and readers told with a gap.
	DefaultOutputLimit int64
	// MaxTimeout bounds any timeout a caller may ask for (7 days); larger
	// values are invalid rather than silently clipped.
	MaxTimeout time.Duration
	// KillGrace is the TERM-to-KILL grace for timeouts, session deletion
	// and Close (500 ms).
	KillGrace time.Duration
	// TrailGrace is how long a command's output is still taken after the
	// command ended, from what it left running (200 ms): `echo a; (echo
	// b) &` writes b after its shell exits, and `bash -c … | cat` would
	// have it. Only a command that leaves a writer behind waits: a
	// server started with & is cut off after it.
	TrailGrace time.Duration
	// DetachedHold is how long the record of an exec whose caller went
	// away before its end (ExecRequest.Detached) is the last that
	// retention drops, for the caller to fetch its result by ID once it
	// is back (5 min; negative: no such preference). Retention drops
	// exec records first otherwise, and under many ending processes it
	// dropped them within a second.
	DetachedHold time.Duration
	// ExitPollInterval is the exit watcher's polling fallback period
	// (50 ms), used when fsnotify events do not arrive (network and FUSE
	// filesystems).
	ExitPollInterval time.Duration
	// Logger receives warnings that have no caller to return to, such as
	// output lost to a full disk (nil: none are logged).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults; DataDir is a fresh directory under
// os.TempDir().
func DefaultConfig() Config {
	return Config{
		DataDir:            filepath.Join(os.TempDir(), "muxd-exec"),
		Shell:              "bash",
		MaxSessions:        64,
		MaxProcesses:       1024,
		RetainCount:        256,
		RetainBytes:        1 << 30,
		DefaultOutputLimit: 64 << 20,
		MaxTimeout:         7 * 24 * time.Hour,
		KillGrace:          500 * time.Millisecond,
		TrailGrace:         200 * time.Millisecond,
		DetachedHold:       5 * time.Minute,
		ExitPollInterval:   50 * time.Millisecond,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DataDir == "" {
		c.DataDir = d.DataDir
	}
	if c.Shell == "" {
		c.Shell = d.Shell
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BaseEnv == nil {
		c.BaseEnv = os.Environ()
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = d.MaxSessions
	}
	if c.MaxProcesses <= 0 {
		c.MaxProcesses = d.MaxProcesses
	}
	if c.RetainCount <= 0 {
		c.RetainCount = d.RetainCount
	}
	if c.RetainBytes <= 0 {
		c.RetainBytes = d.RetainBytes
	}
	if c.DefaultOutputLimit <= 0 {
		c.DefaultOutputLimit = d.DefaultOutputLimit
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = d.MaxTimeout
	}
	if c.TrailGrace <= 0 {
		c.TrailGrace = d.TrailGrace
	}
	if c.DetachedHold == 0 {
		c.DetachedHold = d.DetachedHold
	}
	if c.KillGrace <= 0 {
		c.KillGrace = d.KillGrace
	}
	if c.ExitPollInterval <= 0 {
		c.ExitPollInterval = d.ExitPollInterval
	}
	return c
}
