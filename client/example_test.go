package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/muxd/muxd/client"
)

// An agent harness runs a command in a persistent session and streams
// its output live.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "http://127.0.0.1:3000", client.Options{Token: os.Getenv("MUXD_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := c.CreateSession(ctx, client.SessionOptions{Cwd: "/workspace"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Exec(ctx, "export GREETING=hello; cd /tmp", client.ExecOptions{}); err != nil {
		log.Fatal(err)
	}
	res, err := s.Exec(ctx, `echo "$GREETING from $(pwd)"`, client.ExecOptions{
		OnOutput: func(stream string, data []byte) { fmt.Printf("[%s] %s", stream, data) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", *res.ExitCode)
}

// A long-running server: start it, wait for its port, follow its log,
// then stop the whole tree.
func ExampleClient_StartProcess() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "http://127.0.0.1:3000", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := c.StartProcess(ctx, "python3 -m http.server 8000", client.ProcessOptions{})
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitForPort(wctx, 8000); err != nil {
		log.Fatal(err)
	}
	// Stderr resumes where it stopped if the socket drops.
	go func() { _, _ = io.Copy(os.Stderr, p.Stderr()) }()
	if err := p.Kill(ctx, "TERM", 2*time.Second); err != nil {
		log.Fatal(err)
	}
	info, _ := p.Wait(ctx)
	fmt.Println(info.Status)
}

// A terminal is an io.ReadWriter that survives reconnects.
func ExampleClient_CreateTerminal() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "http://127.0.0.1:3000", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	t, err := c.CreateTerminal(ctx, client.TerminalOptions{Cols: 120, Rows: 40})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close() // detach; the terminal keeps running
	_ = t.Resize(100, 30)
	fmt.Fprintln(t, "ls -la; exit")
	_, _ = io.Copy(os.Stdout, t) // until the shell exits
	code, sig, _ := t.Exit()
	fmt.Println(code, sig)
}
