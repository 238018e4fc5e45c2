package mux

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestCloseWriteDuringAWrite: a CloseWrite that comes while a Write
// queues DATA puts the EOF after every byte the Write reports written,
// never before one: the peer gets exactly those bytes, then EOF.
func TestCloseWriteDuringAWrite(t *testing.T) {
	rt := NewRouter()
	rt.HandleOpen("process", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() {
			n, err := io.Copy(io.Discard, ch)
			if err != nil {
				_ = ch.CloseWithError(NewError(CodeInternal, "%v", err))
				return
			}
			_, _ = ch.Write([]byte(strconv.FormatInt(n, 10)))
			_ = ch.CloseWrite()
		}()
		return nil, nil
	})
	ts := newTestServer(t, pipeTransport, DefaultConfig(), rt)
	c, _ := ts.dial(t, DefaultConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := make([]byte, 200<<10)
	for round := range 300 {
		ch, _, err := c.Open(ctx, "process", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan int, 1)
		go func() {
			n, _ := ch.Write(data)
			wrote <- n
		}()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		if err := ch.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		n := <-wrote
		got, err := io.ReadAll(ch)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if string(got) != strconv.Itoa(n) {
			t.Fatalf("round %d: the peer read %s bytes before EOF, the Write reported %d", round, got, n)
		}
		_ = ch.Close()
	}
}
