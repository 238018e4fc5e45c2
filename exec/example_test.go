package exec_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/muxd/muxd/exec"
)

func Example() {
	dir, _ := os.MkdirTemp("", "muxd-example-")
	defer os.RemoveAll(dir)
	e, err := exec.New(exec.Config{DataDir: dir})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer e.Close(ctx)

	// A stateless command.
	r, _ := e.Exec(ctx, exec.ExecRequest{Command: "echo hello; exit 3"})
	fmt.Printf("%q %d\n", r.Stdout, *r.ExitCode)

	// A session keeps its state between commands.
	s, _ := e.CreateSession(ctx, exec.SessionOptions{})
	_, _ = e.Exec(ctx, exec.ExecRequest{SessionID: s.ID, Command: "cd /; export GREETING=hi"})
	r, _ = e.Exec(ctx, exec.ExecRequest{SessionID: s.ID, Command: "echo $GREETING from $PWD"})
	fmt.Printf("%q\n", r.Stdout)

	// A process from the session's state, waited for a log line.
	p, _ := e.StartProcess(ctx, exec.ProcessRequest{SessionID: s.ID, Command: "echo ready $GREETING; sleep 100"})
	m, _ := e.WaitForLog(ctx, p.ID, `^ready (\w+)`, 0, 0)
	fmt.Println(m.Groups[1])
	_ = e.KillProcess(p.ID, 0, time.Second)
	// Output:
	// "hello\n" 3
	// "hi from /\n"
	// hi
}
