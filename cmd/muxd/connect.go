package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/muxd/muxd/client"
)

// connect dials the daemon for a client command, with an error that says
// what to check.
func connect(o *clientOpts, stderr io.Writer, name string) (*client.Client, bool) {
	tok, err := o.token()
	if err != nil {
		fmt.Fprintf(stderr, "muxd %s: %v\n", name, err)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, o.url, client.Options{Token: tok, Name: "muxd-cli/" + version})
	if err != nil {
		hint := "is muxd serve running there? set --url or MUXD_URL"
		if tok == "" {
			hint += "; if it needs a token, set MUXD_TOKEN or --token-file"
		}
		fmt.Fprintf(stderr, "muxd %s: %v (%s)\n", name, err, hint)
		return nil, false
	}
	return c, true
}
