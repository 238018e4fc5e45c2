package integration

import (
	"os"
	"strconv"
	"strings"
)

// descendants returns the live descendants of root, from /proc.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := ppidOf(pid); ok {
			parent[pid] = ppid
		}
	}
	var out []int
	for pid := range parent {
		for p, hops := parent[pid], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// ppidOf reads the parent pid of a live (non-zombie) process.
func ppidOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, ok := ppidOf(pid)
	return ok
}

func getenv(k string) string { return os.Getenv(k) }
