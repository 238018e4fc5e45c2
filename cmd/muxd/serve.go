package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/internal/proc"
	"github.com/muxd/muxd/server"
)

const serveUsage = `Usage: muxd serve [flags]

Serves shells, processes and terminals over one WebSocket per client:
the page at /, wsmux/1 at /ws, the Cloudflare sandbox PTY protocol at
/ws/terminal, /healthz and /auth.

Binding anything but a loopback address needs a token (MUXD_TOKEN or
--token-file FILE) unless --insecure-no-auth is given. With a token, every
request but the page's and /healthz must present it; without one, browsers may connect
only from the daemon's own page (served under localhost or an IP address)
or from --allowed-origins. Each flag has a MUXD_* environment twin; a flag
on the command line wins over its twin. The token is given one way only.

Flags:
`

// serveFlags binds the serve flags to cfg; the extra values are returned
// by pointer.
type serveOpts struct {
	cfg       server.Config
	token     string
	tokenFile string
	logFormat string
	logLevel  string
}

func newServeFlags(o *serveOpts, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("muxd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &o.cfg
	fs.StringVar(&c.Listen, "listen", c.Listen, "`host:port` to listen on (port 0 picks a free one; the log says which)")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the access token from `file` (e.g. a mounted secret)")
	fs.StringVar(&o.token, "token", "", "access `token` (prefer MUXD_TOKEN or --token-file: argv is visible in ps)")
	fs.Var(listFlag{&c.AllowedOrigins}, "allowed-origins", "with no token: comma-separated browser `origins` allowed besides the daemon's own page: a full origin (https://app.example.com) matches exactly; a host pattern (app.example.com, *.example.com) matches any scheme and port")
	fs.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --listen without a token (only behind a trusted proxy)")
	fs.StringVar(&c.DataDir, "data-dir", server.DefaultDataDir(), "`dir` for process output and other files of this run (created 0700 if missing; each run keeps its files in a run-N directory in it, removed on exit): on a tmpfs, retained output takes RAM")
	fs.StringVar(&c.Shell, "shell", "", "`shell` for terminals (default: the user's login shell, else bash)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: `text` or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn, error")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "concurrent WebSocket connections (open TCP connections are capped at this plus 64; past it a connection is answered 503)")
	fs.IntVar(&c.MaxChannels, "max-channels", c.MaxChannels, "open channels per connection")
	fs.Var(sizeFlag{&c.ConnBudget}, "conn-buffer", "buffered `bytes` per connection")
	fs.IntVar(&c.MaxSessions, "max-sessions", c.MaxSessions, "live bash sessions")
	fs.IntVar(&c.MaxTerminals, "max-terminals", c.MaxTerminals, "live terminals")
	fs.IntVar(&c.MaxProcesses, "max-processes", c.MaxProcesses, "running processes and execs")
	fs.Var(sizeFlag{&c.OutputLimit}, "output-limit", "default retained `bytes` per process stream, exec's too: output further back than that is dropped, from results and from readers that fell behind")
	fs.Var(sizeFlag{&c.RetainBytes}, "retain-bytes", "retained output of ended processes in all, in `bytes`")
	fs.IntVar(&c.RetainCount, "retain-count", c.RetainCount, "ended processes kept readable")
	fs.Var(intSize{&c.MaxRPCRequest}, "max-rpc-request", "largest JSON-RPC request in `bytes`")
	fs.Var(intSize{&c.MaxRPCResponse}, "max-rpc-response", "largest JSON-RPC response in `bytes`")
	fs.IntVar(&c.MaxRPCInflight, "max-rpc-inflight", c.MaxRPCInflight, "unanswered short requests per connection")
	fs.IntVar(&c.MaxLongInflight, "max-long-inflight", c.MaxLongInflight, "unanswered long requests (exec, process.wait and the other waits) per connection")
	return fs
}

func runServe(args []string, stdout, stderr io.Writer) int {
	o := &serveOpts{cfg: server.DefaultConfig()}
	o.cfg.Version = version
	fs := newServeFlags(o, stderr)
	if ok, code := parseFlags(fs, args, func(w io.Writer) {
		fmt.Fprint(w, serveUsage)
		printFlags(w, fs, "token")
		fmt.Fprintln(w, "  (the token's environment variable is MUXD_TOKEN)")
	}, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "muxd serve: unexpected argument %q (see muxd serve --help)\n", fs.Arg(0))
		return 2
	}
	tokenInArgv := o.token != ""
	if err := applyEnv(fs, "token"); err != nil {
		fmt.Fprintf(stderr, "muxd serve: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "muxd serve: %v\n", err)
		return 2
	}
	o.cfg.Logger = log
	if o.cfg.Token, err = loadToken(o, os.Getenv("MUXD_TOKEN")); err != nil {
		fmt.Fprintf(stderr, "muxd serve: %v\n", err)
		return 2
	}
	if tokenInArgv {
		log.Warn("--token is visible to every user through ps; use MUXD_TOKEN or --token-file")
	}
	if t := o.cfg.Token; t != "" && len(t) < minTokenLen {
		log.Warn("the token is short: anyone who reaches the daemon can try tokens (five a second from each address they have, after 20); use 16 bytes or more (head -c 32 /dev/urandom | base64)",
			"bytes", len(t))
	}
	if o.cfg.InsecureNoAuth && o.cfg.Token == "" {
		log.Warn("--insecure-no-auth: anyone who reaches this address runs commands; use only behind a trusted proxy",
			"listen", o.cfg.Listen)
	}
	o.cfg.TestHooks = os.Getenv("MUXD_TEST_HOOKS") == "1"
	scrubEnv()
	hardenProcess(log)

	srv, err := server.New(o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "muxd serve: %v\n", err)
		return 1
	}
	return serveUntilSignal(srv, log, o.cfg.ShutdownTimeout)
}

// serveUntilSignal serves until SIGTERM/SIGINT, then shuts down within the
// budget; a second signal cuts everything at once.
func serveUntilSignal(srv *server.Server, log *slog.Logger, budget time.Duration) int {
	// Not stopped when done: the process exits, and a signal.Stop could
	// wait long behind thousands of busy goroutines (a shutdown's kills).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		log.Error("serve failed", "err", err)
		_ = srv.Close() // Best effort: kill what started.
		return 1
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget+500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	select {
	case err := <-done:
		if errors.Is(err, context.DeadlineExceeded) {
			// Whatever the budget left running is not left behind: the
			// process exits next, and a kill still under way would end
			// with it, its tree frozen.
			log.Warn("shutdown ran out of time: killing what is left at once")
			srv.Abort()
		} else if err != nil {
			log.Warn("shutdown", "err", err)
		}
	case <-sigs:
		log.Warn("second signal: killing everything and exiting at once")
		srv.Abort()
		return 1
	}
	return 0
}

// minTokenLen is the shortest token that starts without a warning.
const minTokenLen = 16

// loadToken picks the token from --token-file, --token or MUXD_TOKEN;
// giving more than one is an error, an empty token is an error.
func loadToken(o *serveOpts, env string) (string, error) {
	n := 0
	for _, v := range []string{o.tokenFile, o.token, env} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return "", errors.New("give the token one way only: MUXD_TOKEN, --token-file or --token")
	}
	tok := o.token
	if env != "" {
		tok = env
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %v", err)
		}
		tok = strings.TrimRight(string(b), "\r\n")
		if tok == "" {
			return "", fmt.Errorf("--token-file %s is empty: write the token into it", o.tokenFile)
		}
	}
	for _, r := range tok {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", errors.New("the token must not contain whitespace or control characters")
		}
	}
	return tok, nil
}

// scrubEnv removes MUXD_* from muxd's own environment once read, so no
// child can inherit them even through a path that forgets to filter.
func scrubEnv() {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MUXD_") {
			_ = os.Unsetenv(k) // Best effort.
		}
	}
}

// hardenProcess makes /proc/<muxd>/environ and memory unreadable to user
// commands running as the same uid.
func hardenProcess(log *slog.Logger) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("prctl(PR_SET_DUMPABLE, 0) failed: /proc/<muxd>/environ may be readable by user commands", "err", err)
	}
	becomeSubreaper(log)
	// What muxd inherited (a shell's or a CI runner's descriptors) must
	// not reach the commands it runs.
	if err := proc.CloseInheritedOnExec(); err != nil {
		log.Warn("marking inherited descriptors close-on-exec failed: commands may inherit them", "err", err)
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
