package server

import (
	"context"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
)

func TestTerminalEchoAndReattachResumes(t *testing.T) {
	_, url := testServer(t, nil)
	c := dialClient(t, url, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := c.CreateTerminal(ctx, client.TerminalOptions{ID: "t1", Shell: "bash"})
	if err != nil {
		t.Fatalf("CreateTerminal: %v", err)
	}
	if _, err := term.Write([]byte("echo hi-$((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, "hi-42", 5*time.Second)
	list, err := c.ListTerminals(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "t1" {
		t.Fatalf("ListTerminals: got %+v, %v", list, err)
	}
	if err := term.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
}
