package main

import (
	"log/slog"

	"github.com/muxd/muxd/internal/proc"
)

// becomeSubreaper makes muxd the reaper of orphans its commands leave, so
// double-forked daemons never linger as zombies.
func becomeSubreaper(log *slog.Logger) {
	if err := proc.BecomeSubreaper(); err != nil {
		log.Warn("could not become a child subreaper: orphans reparent to init", "err", err)
	}
}
