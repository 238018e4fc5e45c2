package proc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// MarkVar is the environment variable through which a tree's members are
// known after they left it: every child gets a fresh random value, and
// its descendants inherit it, including those that double-fork through
// setsid and so lose the parent, group and session links a tree walk
// follows. A program that execs with a cleared environment escapes. The
// name avoids the MUXD_ prefix that marks muxd's own settings.
const MarkVar = "__muxd_tree"

// runMark begins every tree mark of this muxd, so that KillAll knows what
// the run started, wherever it went.
var runMark = randomHex(4)

// newMark returns a fresh tree mark.
func newMark() string { return runMark + randomHex(12) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

// markOf returns pid's tree mark (as its environment was at its last
// exec), "" if none or unreadable.
func markOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	prefix := []byte(MarkVar + "=")
	for len(b) > 0 {
		kv := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v)
		}
	}
	return ""
}

// withMark returns env with MarkVar set to mark, leaving env untouched.
func withMark(env []string, mark string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(MarkVar) && kv[len(MarkVar)] == '=' && kv[:len(MarkVar)] == MarkVar {
			continue
		}
		out = append(out, kv)
	}
	return append(out, MarkVar+"="+mark)
}
