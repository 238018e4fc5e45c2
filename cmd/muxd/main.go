// Command muxd is the muxd daemon (muxd serve) and its command-line client
// (exec, start, ps, logs, kill, attach, health).
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const mainUsage = `muxd gives shells, processes and terminals over one WebSocket.

Usage:
  muxd serve [flags]            run the daemon (127.0.0.1:3000 by default)
  muxd exec [flags] -- CMD...   run a command, stream its output, exit with its code
  muxd start [flags] -- CMD...  start a background process and print its ID
  muxd ps [flags]               list processes, running commands, terminals and sessions
  muxd logs [-f] [flags] ID     print a process's output (-f: follow)
  muxd kill [flags] ID          kill a process tree, or end a terminal or a session
  muxd attach [flags] [ID]      attach this terminal to a muxd terminal (new if no ID)
  muxd health [flags]           exit 0 if the daemon answers /healthz
  muxd version                  print the version

Client commands find the daemon at --url or MUXD_URL (default
http://127.0.0.1:3000) with the token from MUXD_TOKEN or --token-file.
Run "muxd COMMAND --help" for a command's flags.
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" && len(rest) > 0 {
		return run([]string{rest[0], "--help"}, stdin, stdout, stderr)
	}
	helpOut = stdout
	switch cmd {
	case "serve":
		return runServe(rest, stdout, stderr)
	case "health":
		return runHealth(rest, stdout, stderr)
	case "exec":
		return runExec(rest, stdin, stdout, stderr)
	case "start":
		return runStart(rest, stdout, stderr)
	case "ps":
		return runPs(rest, stdout, stderr)
	case "logs":
		return runLogs(rest, stdout, stderr)
	case "kill":
		return runKill(rest, stdout, stderr)
	case "attach":
		return runAttach(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "muxd", version)
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	fmt.Fprintf(stderr, "muxd: unknown command %q\n\n%s", cmd, mainUsage)
	return 2
}
