package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/muxd/muxd/client"
)

// connection is what a client command connects with.
type connection struct {
	name string
	// onRestart, when set, is called if the daemon restarted while the
	// command ran: what it had started there is gone.
	onRestart func()
	// eol ends the notices (attach's raw terminal needs "\r\n").
	eol string
	// giveUp says how to stop waiting for the daemon (default Ctrl-C).
	giveUp string
}

// connect dials the daemon for a client command, with an error that says
// what to check. Lost and regained connections are noted on stderr: a
// command waiting on a daemon it cannot reach should say so.
func connect(o *clientOpts, stderr io.Writer, cn connection) (*client.Client, bool) {
	if cn.eol == "" {
		cn.eol = "\n"
	}
	if _, err := o.httpURL("/"); err != nil {
		fmt.Fprintf(stderr, "muxd %s: %v\n", cn.name, err)
		return nil, false
	}
	tok, err := o.token()
	if err != nil {
		fmt.Fprintf(stderr, "muxd %s: %v\n", cn.name, err)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cn.giveUp == "" {
		cn.giveUp = "Ctrl-C to give up"
	}
	opts := client.Options{Token: tok, Name: "muxd-cli/" + version,
		OnDisconnect: func(err error) {
			fmt.Fprintf(stderr, "muxd %s: lost the connection to the daemon (%v); reconnecting (%s)%s", cn.name, err, cn.giveUp, cn.eol)
		},
		OnReconnect: func(_ string, restarted bool) {
			if !restarted {
				fmt.Fprintf(stderr, "muxd %s: reconnected%s", cn.name, cn.eol)
				return
			}
			fmt.Fprintf(stderr, "muxd %s: reconnected, but the daemon restarted: what it ran before is gone%s", cn.name, cn.eol)
			if cn.onRestart != nil {
				cn.onRestart()
			}
		}}
	c, err := client.Dial(ctx, o.url, opts)
	if err != nil {
		var hint string
		switch {
		case strings.Contains(err.Error(), "(HTTP 401"):
			hint = "the daemon refused the token: check MUXD_TOKEN or --token-file"
			if tok == "" {
				hint = "the daemon needs a token: set MUXD_TOKEN or --token-file"
			}
		case strings.Contains(err.Error(), "(HTTP 429"):
			hint = "the daemon refuses tokens from this address for a while after too many wrong ones: check MUXD_TOKEN or --token-file, then try again"
		case strings.Contains(err.Error(), "(HTTP 503"):
			hint = "the daemon is at a limit or shutting down: see its message above"
		case strings.Contains(err.Error(), "expected handshake response"):
			hint = "no muxd WebSocket at that URL: --url takes the daemon's address, e.g. http://127.0.0.1:3000"
		default:
			hint = "is muxd serve running there? set --url or MUXD_URL"
			if tok == "" {
				hint += "; if it needs a token, set MUXD_TOKEN or --token-file"
			}
		}
		fmt.Fprintf(stderr, "muxd %s: %v (%s)\n", cn.name, err, hint)
		return nil, false
	}
	return c, true
}
