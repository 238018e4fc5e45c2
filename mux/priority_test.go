package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// waitFor polls cond (a gauge of connection state) until it holds or 5 s
// pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a gauge, not synchronizing
	}
}

func TestWriterServesUrgentThenTerminalThenProcessRoundRobin(t *testing.T) {
	opened := make(chan *Channel, 8)
	rt := echoRouter()
	keep := func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() { opened <- ch }() // after OPEN_OK is queued
		return nil, nil
	}
	rt.HandleOpen("p", keep)
	rt.HandleOpen("t", keep)
	ts := newTestServer(t, pipeTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	chans := map[uint32]*Channel{}
	for _, o := range []struct {
		id   uint32
		kind string
	}{{1, "p"}, {3, "p"}, {5, "t"}} {
		rc.open(o.id, o.kind, 1<<20)
		ch := recvOrTimeout(t, opened, 5*time.Second, "open")
		chans[ch.ID()] = ch
	}
	chans[5].SetClass(ClassTerminal)

	// Block the socket: the client reads nothing while A1 is written.
	go func() { _, _ = chans[1].Write([]byte("A1")) }()
	waitFor(t, "a blocked socket write", func() bool { return s.writeStart.Load() != 0 })
	write := func(id uint32, s string) {
		if _, err := chans[id].Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "A1 taken", func() bool { return chans[1].Credit() == 1<<20-2 })
	write(1, "A2")
	write(3, "B1")
	if err := chans[1].SendCtrl(map[string]string{"op": "gap"}); err != nil {
		t.Fatal(err)
	}
	write(5, "T1")
	rc.send(typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":9,"method":"echo","params":["R"]}`))
	waitFor(t, "the RPC answer queued", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.urgentBytes > 0
	})

	var got []string
	for len(got) < 6 {
		h, p := rc.recv()
		switch h.Type() {
		case typeData:
			got = append(got, string(p))
		case typeCtrl:
			got = append(got, fmt.Sprintf("CTRL%d", h.Channel()))
		case typeRPC:
			got = append(got, "RPC")
		}
	}
	want := []string{"A1", "RPC", "T1", "A2", "B1", "CTRL1"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
