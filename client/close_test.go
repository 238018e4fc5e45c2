package client

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// A Close that comes while another is still letting a background kill go
// out returns only once the client is closed.
func TestConcurrentCloseReturnsClosed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, os.Getenv("MUXD_URL"), Options{}) // the daemon of TestMain
	if err != nil {
		t.Fatal(err)
	}
	c.background(func() { time.Sleep(300 * time.Millisecond) })
	first := make(chan struct{})
	go func() {
		_ = c.Close()
		close(first)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first Close never began")
		}
	}
	_ = c.Close()
	if _, err := c.Conn(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after the second Close returned: %v, want ErrClosed", err)
	}
	<-first
}
