package mux_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/muxd/muxd/mux"
)

// A server offers RPC methods and channel kinds through one Router.
func ExampleAccept() {
	rt := mux.NewRouter()
	rt.Handle("server.info", func(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
		return map[string]string{"version": "dev"}, nil
	})
	rt.HandleLong("process.wait", nil, func(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
		<-ctx.Done() // rpc.cancel or the end of the connection
		return nil, ctx.Err()
	})
	rt.HandleOpen("process", func(ctx context.Context, ch *mux.Channel, params json.RawMessage) (any, error) {
		ch.SetInputEnabled(false) // no stdin: grant no credit
		go func() {
			_, _ = ch.WriteStream(ctx, 1, []byte("hello\n"))
			_ = ch.SendCtrl(map[string]any{"op": "exit", "code": 0})
			_ = ch.CloseWrite()
		}()
		return map[string]any{"instance": "i1"}, nil
	})
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := mux.Accept(w, r, mux.DefaultConfig(), rt, mux.ServerInfo{Name: "muxd/dev", Boot: "boot-id"})
		if err != nil {
			return
		}
		<-c.Done()
	})
}

// A client calls methods and reads a process channel frame by frame.
func ExampleDial() {
	ctx := context.Background()
	c, err := mux.Dial(ctx, "ws://127.0.0.1:3000/ws", mux.DialOptions{Client: "example/1"})
	if err != nil {
		return
	}
	defer c.Close()
	var info map[string]any
	_ = c.Call(ctx, "server.info", nil, &info)

	ch, _, err := c.Open(ctx, "process", 0, map[string]string{"id": "p1"})
	if err != nil {
		return
	}
	defer ch.Close()
	buf := make([]byte, c.Hello().Limits.MaxFrame)
	for {
		n, ctrl, err := ch.ReadFrame(buf)
		if err == io.EOF {
			return
		}
		if err != nil {
			return
		}
		if ctrl != nil {
			continue // gap, exit: in order with the data
		}
		_ = buf[:n] // buf[0] is the stream byte
	}
}
