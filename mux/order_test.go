package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// orderRouter serves "queue" {key, n}: its handler takes a place in a
// shared list after a random pause (scheduling jitter), then answers;
// with block set it never takes its place and waits for cancel.
func orderRouter(ordered bool) (*Router, func() map[string][]int) {
	var mu sync.Mutex
	places := map[string][]int{}
	rt := NewRouter()
	rt.HandleLong("queue", nil, func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		var q struct {
			Key   string `json:"key"`
			N     int    `json:"n"`
			Block bool   `json:"block"`
		}
		if err := json.Unmarshal(p, &q); err != nil {
			return nil, err
		}
		if q.Block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		mu.Lock()
		places[q.Key] = append(places[q.Key], q.N)
		mu.Unlock()
		Placed(ctx)
		return q.N, nil
	})
	if ordered {
		rt.Order("queue", func(p json.RawMessage) string {
			var q struct {
				Key string `json:"key"`
			}
			_ = json.Unmarshal(p, &q)
			return q.Key
		})
	}
	return rt, func() map[string][]int { // a copy: handlers may still run
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string][]int, len(places))
		for k, v := range places {
			out[k] = slices.Clone(v)
		}
		return out
	}
}

func queueRequest(id int, params string) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"queue","params":%s}`, id, params))
}

// cancelRequest is rpc.cancel, as request id, of the request of id of.
func cancelRequest(id, of int) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"rpc.cancel","params":{"id":%d}}`, id, of))
}

// Requests of an ordered method, sent back to back, take their places in
// the order they came, per key; without Order they did not (the premise,
// checked too, so the test shows what Order changes).
func TestOrderedRequestsStartInArrivalOrder(t *testing.T) {
	const n = 40
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			rt, places := orderRouter(ordered)
			ts := newTestServer(t, tcpTransport, Config{}, rt)
			rc := rawDial(t, ts, true)
			var batch []byte
			for i := range n {
				key := []string{"a", "b"}[i%2]
				batch = append(batch, appendFrame(nil, typeRPC, 0, queueRequest(i+1, fmt.Sprintf(`{"key":%q,"n":%d}`, key, i)))...)
				rc.sendRaw(batch)
				batch = batch[:0]
			}
			for range n {
				rc.recvType(typeRPC)
			}
			got := places()
			var wantA, wantB []int
			for i := range n {
				if i%2 == 0 {
					wantA = append(wantA, i)
				} else {
					wantB = append(wantB, i)
				}
			}
			inOrder := slices.Equal(got["a"], wantA) && slices.Equal(got["b"], wantB)
			if ordered && !inOrder {
				t.Fatalf("places a %v, b %v: want each key in arrival order", got["a"], got["b"])
			}
			if !ordered && inOrder {
				t.Skip("unordered requests happened to keep their order this time")
			}
		})
	}
}

// An ordered request that never takes its place holds up only the later
// requests with its key, until it ends.
func TestOrderedRequestWaitsOnlyForItsKey(t *testing.T) {
	rt, places := orderRouter(true)
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	rc.send(typeRPC, 0, queueRequest(1, `{"key":"a","block":true}`))
	rc.send(typeRPC, 0, queueRequest(2, `{"key":"a","n":2}`))
	rc.send(typeRPC, 0, queueRequest(3, `{"key":"b","n":3}`))
	_, p := rc.recvType(typeRPC)
	if !json.Valid(p) || !slices.Equal(places()["b"], []int{3}) || len(places()["a"]) != 0 {
		t.Fatalf("first answer %s, places %v: want only b's, a's second waiting", p, places())
	}
	rc.send(typeRPC, 0, cancelRequest(99, 1))
	for range 3 { // the cancel's answer, the first's, the second's
		rc.recvType(typeRPC)
	}
	if !slices.Equal(places()["a"], []int{2}) {
		t.Fatalf("places %v: want a's second once the first ended", places())
	}
}

// rpc.cancel of a request waiting in line: it never runs, and the one
// after it still waits for the one before it (cancelling B let C run
// ahead of A).
func TestCancelledOrderedRequestKeepsTheLine(t *testing.T) {
	rt, places := orderRouter(true)
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	rc.send(typeRPC, 0, queueRequest(1, `{"key":"a","block":true}`))
	rc.send(typeRPC, 0, queueRequest(2, `{"key":"a","n":2}`))
	rc.send(typeRPC, 0, queueRequest(3, `{"key":"a","n":3}`))
	rc.send(typeRPC, 0, cancelRequest(98, 2))
	for range 2 { // the cancel's answer and request 2's
		_, p := rc.recvType(typeRPC)
		var m struct {
			ID    int             `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(p, &m)
		if m.ID == 2 && m.Error == nil {
			t.Fatalf("the cancelled request answered %s, want cancelled", p)
		}
	}
	// A still holds the line: a fourth request, on another key, runs and
	// answers, and by then C has not run.
	rc.send(typeRPC, 0, queueRequest(4, `{"key":"b","n":4}`))
	rc.recvType(typeRPC)
	if got := places()["a"]; len(got) != 0 {
		t.Fatalf("places of a %v while its first request waits: want none", got)
	}
	rc.send(typeRPC, 0, cancelRequest(99, 1))
	for range 3 { // the cancel's answer, request 1's, request 3's
		rc.recvType(typeRPC)
	}
	if got := places()["a"]; !slices.Equal(got, []int{3}) {
		t.Fatalf("places of a %v: want only 3 (2 was cancelled in line)", got)
	}
}

// A connection that ends while ordered requests wait in line: those that
// outlive it (an exec does) still start one after another, in order,
// not all at once.
func TestOrderedRequestsKeepTheirOrderWhenTheConnectionEnds(t *testing.T) {
	const n = 20
	rt, places := orderRouter(true)
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	s := recvOrTimeout(t, ts.conns, 5*time.Second, "server conn")
	rc.send(typeRPC, 0, queueRequest(1, `{"key":"a","block":true}`))
	for i := 2; i <= n; i++ {
		rc.send(typeRPC, 0, queueRequest(i, fmt.Sprintf(`{"key":"a","n":%d}`, i)))
	}
	rc.send(typeRPC, 0, queueRequest(n+1, `{"key":"b","n":0}`)) // a barrier: all read
	rc.recvType(typeRPC)
	_ = rc.ws.CloseNow()
	recvOrTimeout(t, s.Done(), 5*time.Second, "server conn end")
	var got []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = places()["a"]; len(got) == n-1 {
			break
		}
	}
	want := make([]int, 0, n-1)
	for i := 2; i <= n; i++ {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("places after the connection ended %v, want %v", got, want)
	}
}

// Requests that rpc.cancel ends in line leave it at once: a client that
// queues and cancels again and again behind a request that holds its
// key keeps nothing (each left a goroutine waiting for the head, outside
// every cap).
func TestCancelledInLineLeavesNothingBehind(t *testing.T) {
	rt, _ := orderRouter(true)
	ts := newTestServer(t, tcpTransport, Config{}, rt)
	rc := rawDial(t, ts, true)
	rc.send(typeRPC, 0, queueRequest(1, `{"key":"a","block":true}`))
	rc.send(typeRPC, 0, queueRequest(2, `{"key":"b","n":0}`)) // a barrier: the head is in
	rc.recvType(typeRPC)
	before := runtime.NumGoroutine()
	for range 200 {
		rc.send(typeRPC, 0, queueRequest(10, `{"key":"a","n":10}`))
		rc.send(typeRPC, 0, cancelRequest(11, 10))
		for range 2 {
			rc.recvType(typeRPC)
		}
	}
	if after := runtime.NumGoroutine(); after > before+20 {
		t.Fatalf("goroutines %d after 200 requests cancelled in line, %d before", after, before)
	}
	rc.send(typeRPC, 0, cancelRequest(12, 1))
	for range 2 {
		rc.recvType(typeRPC)
	}
}
