package proc

import (
	"bufio"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseListenInodes(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0BB8 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:0BB9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 100 0 0 10 0
   4: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1005 1 0000000000000000 100 0 0 10 0
   5: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1006 1 0000000000000000 100 0 0 10 0
   6: short line
`
	tests := []struct {
		port int
		want []uint64
	}{
		{3000, []uint64{1001, 1002, 1005}}, // not 1003 (established) nor 1004 (3001)
		{3001, []uint64{1004}},
		{80, []uint64{1006}}, // 0x0050: the port is four hex digits
		{8080, nil},
	}
	for _, tc := range tests {
		got := parseListenInodes(bufio.NewScanner(strings.NewReader(table)), tc.port)
		if !slices.Equal(got, tc.want) {
			t.Errorf("port %d: %v, want %v", tc.port, got, tc.want)
		}
	}
}

// A listener of this process is found in /proc/net/tcp and by its holder.
func TestListenerHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	inodes := ListenInodes(ln.Addr().(*net.TCPAddr).Port)
	if len(inodes) != 1 {
		t.Fatalf("listening inodes %v, want one", inodes)
	}
	if !HoldsSocket([]int{1, os.Getpid()}, inodes) || HoldsSocket(nil, inodes) {
		t.Fatal("HoldsSocket does not find this process's listener, or finds it with no pids")
	}
	if pid, cmd := SocketHolder(inodes); pid != os.Getpid() || cmd == "" {
		t.Fatalf("holder %d %q, want this process (%d)", pid, cmd, os.Getpid())
	}
	_ = ln.Close()
	if inodes := ListenInodes(ln.Addr().(*net.TCPAddr).Port); len(inodes) != 0 {
		t.Fatalf("after close: %v", inodes)
	}
}
