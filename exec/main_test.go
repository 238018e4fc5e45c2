package exec

import (
	"net"
	"os"
	"testing"
	"time"
)

// listenHelperEnv makes the test binary a helper that listens on
// 127.0.0.1 at the port it names and waits (at most a minute) to be
// killed: a server for the port waits, with no tool beyond the binary.
const listenHelperEnv = "EXEC_TEST_LISTEN"

func TestMain(m *testing.M) {
	if port := os.Getenv(listenHelperEnv); port != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		_ = ln.Close()
		return
	}
	os.Exit(m.Run())
}
