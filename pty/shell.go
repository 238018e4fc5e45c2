package pty

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// loginShell returns the current user's shell from /etc/passwd, else bash
// found on PATH, else /bin/sh.
func loginShell() string {
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		uid := strconv.Itoa(os.Getuid())
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) >= 7 && fields[2] == uid && fields[6] != "" {
				if _, err := os.Stat(fields[6]); err == nil && !strings.HasSuffix(fields[6], "nologin") && !strings.HasSuffix(fields[6], "/false") {
					return fields[6]
				}
				break
			}
		}
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}
