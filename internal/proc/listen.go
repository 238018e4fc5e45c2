package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Which process holds a listening TCP port: for a wait on a process's
// port, which must not take another program's listener (an old dev
// server still on the port, which made the new one fail with
// EADDRINUSE) for the process's own.

// ListenInodes returns the socket inodes of the TCP listeners on port in
// this network namespace (IPv4 and IPv6), from /proc/net/tcp and tcp6.
func ListenInodes(port int) []uint64 {
	var out []uint64
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		out = append(out, listenInodes(f, port)...)
	}
	return out
}

// tcpListen is the state column's value for a listening socket.
const tcpListen = "0A"

func listenInodes(path string, port int) []uint64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseListenInodes(bufio.NewScanner(f), port)
}

// parseListenInodes reads a /proc/net/tcp table: after a header line,
// "sl local_address rem_address st … uid timeout inode …", addresses as
// hex ADDR:PORT.
func parseListenInodes(sc *bufio.Scanner, port int) []uint64 {
	want := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for len(want) < 4 {
		want = "0" + want
	}
	var out []uint64
	sc.Scan() // the header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 10 || string(f[3]) != tcpListen {
			continue
		}
		local := f[1]
		i := bytes.LastIndexByte(local, ':')
		if i < 0 || !strings.EqualFold(string(local[i+1:]), want) {
			continue
		}
		if ino, err := strconv.ParseUint(string(f[9]), 10, 64); err == nil && ino != 0 {
			out = append(out, ino)
		}
	}
	return out
}

// HoldsSocket reports whether one of pids has an open descriptor on one
// of the socket inodes.
func HoldsSocket(pids []int, inodes []uint64) bool {
	for _, pid := range pids {
		if socketHolder(pid, inodes) {
			return true
		}
	}
	return false
}

// maxHolderScan bounds the processes SocketHolder looks at.
const maxHolderScan = 4096

// SocketHolder returns a process that holds one of the socket inodes, and
// its command line (NULs as spaces, cut at 200 bytes); 0 when none that
// this process may look into does.
func SocketHolder(inodes []uint64) (pid int, cmd string) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, ""
	}
	names, _ := d.Readdirnames(-1) // Best effort: a partial list still helps.
	_ = d.Close()
	for i, n := range names {
		if i >= maxHolderScan {
			break
		}
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if socketHolder(p, inodes) {
			b, _ := os.ReadFile("/proc/" + n + "/cmdline")
			c := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
			if len(c) > 200 {
				c = c[:200] + "…"
			}
			return p, c
		}
	}
	return 0, ""
}

// socketHolder reports whether pid has a descriptor on one of inodes.
func socketHolder(pid int, inodes []uint64) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1) // Best effort.
	_ = d.Close()
	for _, n := range names {
		link, err := os.Readlink(dir + n)
		if err != nil {
			continue
		}
		s, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err != nil {
			continue
		}
		for _, want := range inodes {
			if ino == want {
				return true
			}
		}
	}
	return false
}

// Members returns the live members of the child's tree: the child while
// it runs, its process group and session, what carries its tree mark
// ([MarkVar]), and their descendants (see [Process.KillTree]).
func (p *Process) Members() []int {
	m := &member{mark: p.mark, since: p.start.Load(), until: p.ended.Load()}
	return tree(p.Pid, sharedScans.snapshot(), !p.Exited(), m)
}
