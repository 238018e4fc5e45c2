package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/muxd/muxd/client"
)

// An agent harness runs commands in a persistent session, streaming the
// output live. The daemon is at MUXD_URL (http://127.0.0.1:3000 by
// default, with its token in MUXD_TOKEN), as for the CLI.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(ctx, os.Getenv("MUXD_URL"), client.Options{Token: os.Getenv("MUXD_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := c.CreateSession(ctx, client.SessionOptions{Cwd: os.TempDir()})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Delete(ctx)
	if _, err := s.Exec(ctx, "export GREETING=hello; cd /", client.ExecOptions{}); err != nil {
		log.Fatal(err)
	}
	res, err := s.Exec(ctx, `echo "$GREETING from $(pwd)"; echo oops >&2; exit 3`, client.ExecOptions{
		OnOutput: func(stream string, data []byte) { fmt.Printf("[%s] %s", stream, data) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", *res.ExitCode)
	// Unordered output:
	// [stdout] hello from /
	// [stderr] oops
	// exit code 3
}

// A long-running server: start it, wait until it says it is ready (or
// with WaitForPort, until its port answers), then stop its whole tree.
func ExampleClient_StartProcess() {
	ctx := context.Background()
	c, err := client.Dial(ctx, os.Getenv("MUXD_URL"), client.Options{Token: os.Getenv("MUXD_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := c.StartProcess(ctx, "echo starting; sleep 0.2; echo listening on 8000; sleep 600", client.ProcessOptions{})
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := p.WaitForLog(wctx, `listening on \d+`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready:", m.Line)
	if err := p.Kill(ctx, "TERM", 2*time.Second); err != nil {
		log.Fatal(err)
	}
	info, err := p.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The log stays readable by id after the end, and resumes where it
	// stopped if the socket drops.
	out, _ := io.ReadAll(p.Stdout())
	fmt.Printf("%s, signal %s; its output:\n%s", info.Status, info.Signal, out)
	// Output:
	// ready: listening on 8000
	// killed, signal TERM; its output:
	// starting
	// listening on 8000
}

// A terminal is an io.ReadWriter (its bytes are the PTY's) that survives
// reconnects; it ends with the shell's exit.
func ExampleClient_CreateTerminal() {
	ctx := context.Background()
	c, err := client.Dial(ctx, os.Getenv("MUXD_URL"), client.Options{Token: os.Getenv("MUXD_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	t, err := c.CreateTerminal(ctx, client.TerminalOptions{Shell: "bash", Cols: 120, Rows: 40})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close() // detaches; the terminal itself runs until its shell exits
	_ = t.Resize(100, 30)
	fmt.Fprintln(t, "stty size; exit 3")
	screen, _ := io.ReadAll(t) // until the shell exits
	code, sig, _ := t.Exit()
	fmt.Println(bytes.Contains(screen, []byte("30 100")), *code, sig == "")
	// Output:
	// true 3 true
}
