package server

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Config is everything muxd serve needs. Build it with DefaultConfig and
// override fields; New validates it.
type Config struct {
	// Listen is the TCP address to bind (host:port). A host that is not a
	// loopback address requires Token unless InsecureNoAuth is set.
	Listen string
	// Token, when non-empty, is required on every route except the page,
	// its assets, /healthz and /auth. Never logged.
	Token string
	// AllowedOrigins are the browser origins accepted on requests that
	// carry no valid token, besides the daemon's own origin. Entries are
	// full origins ("https://app.example.com") or host patterns
	// ("*.example.com", path.Match syntax); "*" accepts any origin.
	AllowedOrigins []string
	// InsecureNoAuth allows a non-loopback bind without a token, for a
	// network only a trusted proxy can reach.
	InsecureNoAuth bool
	// DataDir holds the daemon's temporary files; each run uses its own
	// subdirectory, removed on shutdown. Empty picks DefaultDataDir().
	DataDir string
	// Shell is the shell for terminals ("" = the user's login shell, or bash).
	Shell string
	// Version is reported by server.info and HELLO.
	Version string
	// Logger receives one line per connection and resource lifecycle event.
	Logger *slog.Logger
	// TestHooks enables POST /_test/drop (loopback only). Never on by default.
	TestHooks bool

	// MaxConnections caps concurrent /ws and /ws/terminal sockets; each
	// costs up to ConnBudget of memory.
	MaxConnections int
	// MaxChannels caps open channels per connection (PROTOCOL maxChannels).
	MaxChannels int
	// ConnBudget bounds the bytes buffered per connection (16 MiB).
	ConnBudget int64
	// MaxSessions caps live bash sessions.
	MaxSessions int
	// MaxTerminals caps live terminals.
	MaxTerminals int
	// MaxProcesses caps running processes and execs.
	MaxProcesses int
	// OutputLimit is the default bytes retained per process stream (64 MiB).
	OutputLimit int64
	// RetainBytes caps retained output of ended processes in all (1 GiB).
	RetainBytes int64
	// RetainCount caps ended processes kept for reading (256).
	RetainCount int
	// MaxRPCRequest and MaxRPCResponse bound one JSON-RPC message in bytes.
	MaxRPCRequest, MaxRPCResponse int
	// MaxRPCInflight caps unanswered short requests per connection.
	MaxRPCInflight int
	// MaxLongInflight caps unanswered long requests (exec, waits) per
	// connection, apart from the short ones so that a client waiting on
	// many things can still kill and list.
	MaxLongInflight int
	// ShutdownTimeout bounds Shutdown as a whole (the daemon exits within 5 s).
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults `muxd serve --help` shows.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:3000",
		Version:         "dev",
		MaxConnections:  256,
		MaxChannels:     1024,
		ConnBudget:      16 << 20, // 16 MiB
		MaxSessions:     256,
		MaxTerminals:    256,
		MaxProcesses:    1024,
		OutputLimit:     64 << 20, // 64 MiB per stream
		RetainBytes:     1 << 30,  // 1 GiB
		RetainCount:     256,
		MaxRPCRequest:   1 << 20, // 1 MiB
		MaxRPCResponse:  4 << 20, // 4 MiB
		MaxRPCInflight:  32,
		MaxLongInflight: 256,
		ShutdownTimeout: 4 * time.Second,
	}
}

// Validate reports the first setting that cannot work, as an error that
// says how to fix it. It enforces the exposure rule: a non-loopback bind
// needs a token or InsecureNoAuth.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("%w: --listen %q: want host:port, e.g. 127.0.0.1:3000", ErrConfig, c.Listen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%w: --listen %q: bad port", ErrConfig, c.Listen)
	}
	if !IsLoopbackHost(host) && c.Token == "" && !c.InsecureNoAuth {
		return fmt.Errorf("%w: --listen %s is reachable from other machines: "+
			"set a token (MUXD_TOKEN or --token-file FILE), "+
			"or pass --insecure-no-auth if only a trusted proxy can reach this address", ErrConfig, c.Listen)
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"--max-connections", int64(c.MaxConnections)},
		{"--max-channels", int64(c.MaxChannels)},
		{"--conn-buffer", c.ConnBudget},
		{"--max-sessions", int64(c.MaxSessions)},
		{"--max-terminals", int64(c.MaxTerminals)},
		{"--max-processes", int64(c.MaxProcesses)},
		{"--output-limit", c.OutputLimit},
		{"--retain-bytes", c.RetainBytes},
		{"--retain-count", int64(c.RetainCount)},
		{"--max-rpc-request", int64(c.MaxRPCRequest)},
		{"--max-rpc-response", int64(c.MaxRPCResponse)},
		{"--max-rpc-inflight", int64(c.MaxRPCInflight)},
		{"--max-long-inflight", int64(c.MaxLongInflight)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %d", ErrConfig, p.name, p.v)
		}
	}
	if c.MaxRPCRequest < 1024 || c.MaxRPCResponse < 64<<10 {
		return fmt.Errorf("%w: --max-rpc-request must be at least 1024 and --max-rpc-response at least 65536", ErrConfig)
	}
	// Below this every request is refused as over the budget, and a
	// client retries for ever.
	if c.ConnBudget < 1<<20 {
		return fmt.Errorf("%w: --conn-buffer must be at least 1MiB, got %d", ErrConfig, c.ConnBudget)
	}
	if c.Shell != "" {
		if _, err := exec.LookPath(c.Shell); err != nil {
			return fmt.Errorf("%w: --shell %s: %v", ErrConfig, c.Shell, err)
		}
	}
	return nil
}

// IsLoopbackHost reports whether host (from host:port) names only the
// loopback interface. An empty host binds every interface, so it is not.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DefaultDataDir is $XDG_RUNTIME_DIR/muxd when that is set, else
// $TMPDIR/muxd-<uid>: private to the user, on a local filesystem.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "muxd")
	}
	return filepath.Join(os.TempDir(), "muxd-"+strconv.Itoa(os.Getuid()))
}
