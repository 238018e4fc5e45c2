package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

const healthUsage = `Usage: muxd health [flags]

Exits 0 when the daemon answers GET /healthz, 1 otherwise (the Docker
HEALTHCHECK runs it).

Flags:
`

func runHealth(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd health", flag.ContinueOnError)
	addClientFlags(fs, &o)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this `duration`")
	if ok, code := parseClientFlags(fs, args, healthUsage, stderr); !ok {
		return code
	}
	u, err := o.httpURL("/healthz")
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "muxd health: %v\n", err)
		return 2
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
	fmt.Fprintln(stdout, "ok")
	return 0
}
