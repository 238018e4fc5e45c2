package server

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/mux"
)

// execEngine wraps exec/'s engine and forwards its lifecycle events as
// notifications and log lines.
type execEngine struct {
	e     *exec.Engine
	unsub func()
}

func newExecEngine(s *Server, n *notifier) (execEngine, error) {
	e, err := exec.New(exec.Config{
		DataDir:            s.dataDirFor("exec"),
		MaxSessions:        s.cfg.MaxSessions,
		MaxProcesses:       s.cfg.MaxProcesses,
		RetainCount:        s.cfg.RetainCount,
		RetainBytes:        s.cfg.RetainBytes,
		DefaultOutputLimit: s.cfg.OutputLimit,
		Logger:             s.log,
	})
	if err != nil {
		return execEngine{}, err
	}
	// A run that dies uncleanly leaves this behind too: say where.
	if err := s.run.noteShm(e.RuntimeDir()); err != nil {
		s.log.Warn("noting the session files' directory", "err", err)
	}
	unsub := e.Subscribe(func(ev exec.Event) {
		p := ev.Process
		switch ev.Kind {
		case "process.started":
			s.log.Info("process started", "id", p.ID, "pid", p.Pid, "session", p.SessionID)
			n.send("process.started", toWire(p))
		case "process.exited":
			s.log.Info("process exited", "id", p.ID, "status", p.Status, "exitCode", intOrNil(p.ExitCode), "signal", p.Signal)
			n.send("process.exited", map[string]any{"id": p.ID, "status": p.Status, "exitCode": p.ExitCode,
				"signal": nullString(p.Signal)})
		}
	})
	return execEngine{e: e, unsub: unsub}, nil
}

// close ends every process and session. The subscription outlives the
// engine's Close, so that the processes it kills are logged as exits.
func (x execEngine) close(ctx context.Context, log *slog.Logger) error {
	defer x.unsub()
	sessions := x.e.ListSessions()
	err := x.e.Close(ctx)
	for _, si := range sessions {
		log.Info("session deleted", "id", si.ID, "reason", "shutdown")
	}
	return err
}

func (b *backend) registerExec() {
	rt := b.router
	rt.HandleLong("exec", nil, b.exec)
	rt.Handle("session.create", b.sessionCreate)
	rt.Handle("session.list", b.sessionList)
	rt.Handle("session.interrupt", b.sessionInterrupt)
	rt.Handle("session.delete", b.sessionDelete)
	rt.HandleLong("process.start", startIsLong, b.processStart)
	rt.Handle("process.get", b.processGet)
	rt.Handle("process.list", b.processList)
	rt.Handle("process.read", b.processRead)
	rt.HandleLong("process.wait", nil, b.processWait)
	rt.HandleLong("process.kill", killIsLong, b.processKill)
	rt.HandleLong("process.waitForLog", nil, b.processWaitForLog)
	rt.HandleLong("process.waitForPort", nil, b.processWaitForPort)
	rt.Handle("process.remove", b.processRemove)
	rt.HandleOpen("process", channelCodes(b.openProcess))
	// Commands sent back to back for one session run in the order they
	// came (PROTOCOL: arrival order), though each request has its own
	// goroutine: the next starts once the one before is in the session's
	// queue (exec.WithPlaced, mux.Placed).
	rt.Order("exec", sessionOrderKey("sessionId"))
	rt.Order("process.start", sessionOrderKey("sessionId"))
	rt.Order("session.create", sessionOrderKey("id"))
	rt.Order("session.delete", sessionOrderKey("id"))
}

// sessionOrderKey returns the order key of requests for the session named
// by field (none without it). The read loop calls it for every such
// request: it reads one member, not the whole params (an exec's stdin).
func sessionOrderKey(field string) func(json.RawMessage) string {
	return func(params json.RawMessage) string {
		if id := mux.StringMember(params, field); id != "" {
			return "session " + id
		}
		return ""
	}
}

// placedCtx makes the engine tell the connection when the request of ctx
// holds its place in its session's queue (see registerExec).
func placedCtx(ctx context.Context) context.Context {
	return exec.WithPlaced(ctx, func() { mux.Placed(ctx) })
}

// execCodes maps exec errors to wire codes, first match wins.
var execCodes = []errCode{
	{exec.ErrNotFound, mux.CodeNotFound},
	{exec.ErrAlreadyExists, mux.CodeAlreadyExists},
	{exec.ErrSessionDead, mux.CodeSessionDead},
	{exec.ErrLimit, mux.CodeLimitReached},
	{exec.ErrInvalid, mux.CodeInvalidParams},
	{exec.ErrTimeout, mux.CodeTimeout},
	{context.DeadlineExceeded, mux.CodeTimeout},
	// waitForLog/waitForPort: the process ended first (PROTOCOL: timeout).
	{exec.ErrEnded, mux.CodeTimeout},
	{exec.ErrNotWritable, mux.CodeNotWritable},
	{exec.ErrBusy, mux.CodeBusy},
	{context.Canceled, mux.CodeCancelled},
}

// execError maps exec errors to wire codes.
func execError(err error) error { return wireError(err, execCodes) }
