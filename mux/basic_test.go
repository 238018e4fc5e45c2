package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"
)

func TestHelloAndRPC(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			ts := newTestServer(t, tr, Config{}, echoRouter())
			c, s := ts.dial(t, Config{})
			if got := c.Hello(); got.Server != "test/1" || got.Boot != "boot-1" || got.Limits.MaxFrame != 32<<10 {
				t.Fatalf("client saw HELLO %+v", got)
			}
			if got := s.Hello().Client; got != "test/1" {
				t.Fatalf("server saw client %q, want test/1", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var res map[string]int
			if err := c.Call(ctx, "echo", map[string]int{"a": 1}, &res); err != nil || res["a"] != 1 {
				t.Fatalf("echo: %v %v", res, err)
			}
			err := c.Call(ctx, "fail", nil, nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeNotFound || e.Reason != "not_found" {
				t.Fatalf("fail: got %v, want not_found", err)
			}
			err = c.Call(ctx, "nope", nil, nil)
			if !errors.As(err, &e) || e.Code != CodeMethodNotFound || e.Reason != "method_not_found" {
				t.Fatalf("nope: got %v, want method_not_found", err)
			}
		})
	}
}

func TestChannelEcho(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			ts := newTestServer(t, tr, Config{}, echoRouter())
			c, _ := ts.dial(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ch, meta, err := c.Open(ctx, "terminal", 0, map[string]string{"id": "x"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(meta, []byte(`"terminal"`)) {
				t.Fatalf("meta %s", meta)
			}
			msg := []byte("hello world")
			if _, err := ch.Write(msg); err != nil {
				t.Fatal(err)
			}
			if got := readN(t, ch, len(msg), 5*time.Second); !bytes.Equal(got, msg) {
				t.Fatalf("got %q, want %q", got, msg)
			}
			if err := ch.Close(); err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Open(ctx, "nokind", 0, nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeProtocol {
				t.Fatalf("open unknown kind: got %v, want protocol", err)
			}
		})
	}
}

func TestMuxPingMeasuresRTT(t *testing.T) {
	ts := newTestServer(t, pipeTransport, Config{}, echoRouter())
	c, _ := ts.dial(t, Config{})
	for range 3 {
		if d, err := c.Ping(ctx5(t)); err != nil || d <= 0 {
			t.Fatalf("ping: %v %v", d, err)
		}
	}
}

// TestEOFThenCloseReadsAsEOF: a peer that ends its input with EOF and
// then closes the channel (the protocol's order) leaves its data and then
// io.EOF to read, not the close: a process's stdin must see its end.
func TestEOFThenCloseReadsAsEOF(t *testing.T) {
	got := make(chan error, 1)
	data := make(chan []byte, 1)
	rt := NewRouter()
	rt.HandleOpen("sink", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) {
		go func() {
			<-ch.Done() // the CLOSE has come: read only then
			var all []byte
			buf := make([]byte, 1024)
			for {
				n, err := ch.Read(buf)
				all = append(all, buf[:n]...)
				if err != nil {
					data <- all
					got <- err
					return
				}
			}
		}()
		return nil, nil
	})
	ts := newTestServer(t, pipeTransport, Config{}, rt)
	c, _ := ts.dial(t, Config{})
	ch, _, err := c.Open(ctx5(t), "sink", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := ch.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if b := recvOrTimeout(t, data, 5*time.Second, "data"); string(b) != "hello" {
		t.Errorf("data %q", b)
	}
	if err := recvOrTimeout(t, got, 5*time.Second, "end"); err != io.EOF {
		t.Errorf("read after EOF and CLOSE: %v, want io.EOF", err)
	}
}
