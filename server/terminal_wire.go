package server

import "github.com/muxd/muxd/pty"

// terminalWire is docs/protocol.md's Terminal. It differs from pty.Info only
// in signal: null unless a signal ended the shell, as in Process and in
// terminal.exited (pty.Info says "").
type terminalWire struct {
	ID          string  `json:"id"`
	Instance    string  `json:"instance"`
	Title       string  `json:"title"`
	Pid         int     `json:"pid"`
	Cols        int     `json:"cols"`
	Rows        int     `json:"rows"`
	Attachments int     `json:"attachments"`
	Exited      bool    `json:"exited"`
	ExitCode    *int    `json:"exitCode"`
	Signal      *string `json:"signal"`
	End         int64   `json:"end"`
}

func terminalToWire(i pty.Info) terminalWire {
	return terminalWire{ID: i.ID, Instance: i.Instance, Title: i.Title, Pid: i.Pid, Cols: i.Cols, Rows: i.Rows,
		Attachments: i.Attachments, Exited: i.Exited, ExitCode: i.ExitCode, Signal: nullString(i.Signal), End: i.End}
}

func terminalsToWire(list []pty.Info) []terminalWire {
	out := make([]terminalWire, 0, len(list))
	for _, i := range list {
		out = append(out, terminalToWire(i))
	}
	return out
}
