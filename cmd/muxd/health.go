package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

const healthUsage = `Usage: muxd health [flags]

Exits 0 when the daemon answers GET /healthz, 1 otherwise (the Docker
HEALTHCHECK runs it). With a token (MUXD_TOKEN or --token-file), it also
checks that the daemon accepts it (GET /auth), so a client's settings can
be tested.

Flags:
`

func runHealth(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd health", flag.ContinueOnError)
	addClientFlags(fs, &o)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this `duration`")
	// Every failure exits 1: Docker reserves a HEALTHCHECK's exit 2.
	if ok, code := parseClientFlags(fs, &o, args, healthUsage, stderr); !ok {
		return min(code, 1)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "muxd health: unexpected argument %q (see muxd health --help)\n", fs.Arg(0))
		return 1
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "muxd health: --timeout %v must be positive\n", *timeout)
		return 1
	}
	u, err := o.httpURL("/healthz")
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return 1
	}
	tok, err := o.token()
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v (is muxd serve running at %s?)\n", err, o.url)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // Best effort.
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "muxd health: %s answered %s\n", u, resp.Status)
		return 1
	}
	if tok != "" {
		required, code := checkToken(ctx, &o, tok, stderr)
		switch {
		case code != 0:
			return code
		case required:
			fmt.Fprintln(stdout, "ok (token accepted)")
		default:
			fmt.Fprintln(stdout, "ok (the daemon takes no token)")
		}
		return 0
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// checkToken asks /auth whether the daemon takes tok, and whether it
// requires one at all.
func checkToken(ctx context.Context, o *clientOpts, tok string, stderr io.Writer) (required bool, code int) {
	u, err := o.httpURL("/auth")
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return false, 1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return false, 1
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return false, 1
	}
	defer resp.Body.Close()
	var answer struct {
		TokenRequired *bool `json:"tokenRequired"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // Best effort.
	switch resp.StatusCode {
	case http.StatusOK:
		// A daemon that does not say (older ones): as before.
		if json.Unmarshal(body, &answer) == nil && answer.TokenRequired != nil {
			return *answer.TokenRequired, 0
		}
		return true, 0
	case http.StatusUnauthorized, http.StatusForbidden:
		fmt.Fprintln(stderr, "muxd health: the daemon is up but refused the token (check MUXD_TOKEN or --token-file)")
	case http.StatusTooManyRequests:
		fmt.Fprintf(stderr, "muxd health: the daemon is up but refuses tokens from this address for %s s after too many wrong ones (check MUXD_TOKEN or --token-file)\n",
			resp.Header.Get("Retry-After"))
	default:
		fmt.Fprintf(stderr, "muxd health: %s answered %s\n", u, resp.Status)
	}
	return false, 1
}
