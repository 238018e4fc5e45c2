package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/muxd/muxd/internal/proc"
)

// caughtSignal is the cause of a context that a signal ended, so that a
// command can exit as a shell would (128+N).
type caughtSignal struct{ sig syscall.Signal }

func (c caughtSignal) Error() string { return "got SIG" + proc.SignalName(c.sig) }

// signalContext is signal.NotifyContext that records which signal came
// (context.Cause is a caughtSignal). stop releases the signals.
func signalContext(sigs ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			if sig, ok := s.(syscall.Signal); ok {
				cancel(caughtSignal{sig})
			} else {
				cancel(fmt.Errorf("got %v", s))
			}
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptedStatus is the exit status after ctx was ended by a signal:
// 128+N for signal N (130 for Ctrl-C), 130 for anything else.
func interruptedStatus(ctx context.Context) int {
	var c caughtSignal
	if errors.As(context.Cause(ctx), &c) {
		return 128 + int(c.sig)
	}
	return 130
}
