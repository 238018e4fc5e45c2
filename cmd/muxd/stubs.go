package main

import (
	"fmt"
	"io"
)

func notYet(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "muxd %s: not available in this build yet\n", name)
	return 1
}

func runExec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return notYet("exec", stderr)
}
func runPs(args []string, stdout, stderr io.Writer) int     { return notYet("ps", stderr) }
func runLogs(args []string, stdout, stderr io.Writer) int   { return notYet("logs", stderr) }
func runKill(args []string, stdout, stderr io.Writer) int   { return notYet("kill", stderr) }
func runAttach(args []string, stdout, stderr io.Writer) int { return notYet("attach", stderr) }
