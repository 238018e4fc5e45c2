package proc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseProcListeners(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0BB8 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:0BB9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 100 0 0 10 0
   4: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1005 1 0000000000000000 100 0 0 10 0
   5: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1006 1 0000000000000000 100 0 0 10 0
   6: 0201A8C0:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1007 1 0000000000000000 100 0 0 10 0
   7: 0000000000000000FFFF00000100007F:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1008 1 0000000000000000 100 0 0 10 0
   8: short line
`
	ls := parseProcListeners(bufio.NewScanner(strings.NewReader(table)))
	var got []string
	for _, l := range ls {
		got = append(got, fmt.Sprintf("%s %d %d", l.ip, l.port, l.inode))
	}
	want := []string{ // not 1003: established
		"127.0.0.1 3000 1001", "0.0.0.0 3000 1002", "127.0.0.1 3001 1004", "::1 3000 1005",
		"127.0.0.1 80 1006", "192.168.1.2 3000 1007", "127.0.0.1 3000 1008",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listeners\n%q\nwant\n%q", got, want)
	}
	// What loopback reaches: not 192.168.1.2.
	if got, want := reachable(ls, 3000), []uint64{1001, 1002, 1005, 1008}; !slices.Equal(got, want) {
		t.Fatalf("reachable on 3000: %v, want %v", got, want)
	}
}

// A listener of this process is found in /proc/net/tcp and by its holder.
func TestListenerHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	inodes := ListenInodes(port)
	if len(inodes) != 1 {
		t.Fatalf("listening inodes %v, want one", inodes)
	}
	// sock_diag and /proc/net/tcp agree.
	diag, err := diagListeners()
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	for _, ls := range [][]listener{diag, procListeners()} {
		if !slices.ContainsFunc(ls, func(l listener) bool {
			return l.port == port && l.inode == inodes[0] && l.ip.Equal(net.IPv4(127, 0, 0, 1))
		}) {
			t.Fatalf("listener 127.0.0.1:%d inode %d not in %+v", port, inodes[0], ls)
		}
	}
	// An IPv6 loopback listener counts too.
	if l2, err := net.Listen("tcp", "[::1]:0"); err == nil {
		defer l2.Close()
		if got := ListenInodes(l2.Addr().(*net.TCPAddr).Port); len(got) != 1 {
			t.Fatalf("::1 listener: %v, want one", got)
		}
	}
	if !HoldsSocket([]int{1, os.Getpid()}, inodes) || HoldsSocket(nil, inodes) {
		t.Fatal("HoldsSocket does not find this process's listener, or finds it with no pids")
	}
	if h, ok := SocketHolder(inodes); !ok || h.Pid != os.Getpid() || h.Cmd == "" || h.Start == 0 || h.Start > Ticks() {
		t.Fatalf("holder %+v %v, want this process (%d)", h, ok, os.Getpid())
	}
	_ = ln.Close()
	if inodes := ListenInodes(ln.Addr().(*net.TCPAddr).Port); len(inodes) != 0 {
		t.Fatalf("after close: %v", inodes)
	}
}
