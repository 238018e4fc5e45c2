package termmodes

import (
	"bytes"
	"strings"
	"testing"
)

func TestModesFollowWhatOutputSets(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		restore string // AppendRestore of the state
		undo    string // AppendUndo of the state
	}{
		{"plain text", "hello\r\nworld", "", ""},
		{"vim-like start", "\x1b[?1049h\x1b[22;0;0t\x1b[>4;2m\x1b[?1h\x1b=\x1b[?2004h\x1b[?25l\x1b[2 q",
			"\x1b[?1049h\x1b[?1h\x1b[?25l\x1b[?2004h\x1b=\x1b[2 q\x1b[>4;2m",
			"\x1b[?1l\x1b[?25h\x1b[?2004l\x1b>\x1b[0 q\x1b[>4;0m\x1b[?1049l"},
		{"vim-like start then exit", "\x1b[?1049h\x1b[>4;2m\x1b[?1h\x1b=\x1b[?2004h hi \x1b[?2004l\x1b[?1l\x1b>\x1b[>4;m\x1b[?1049l", "", ""},
		{"several modes in one sequence", "\x1b[?1000;1006;1004h",
			"\x1b[?1004h\x1b[?1000h\x1b[?1006h", "\x1b[?1004l\x1b[?1000l\x1b[?1006l"},
		{"one mouse mode at a time", "\x1b[?1003h\x1b[?1000h", "\x1b[?1000h", "\x1b[?1000l"},
		{"resetting any mouse mode ends reporting", "\x1b[?1002h\x1b[?1000l", "", ""},
		{"an encoding is reset only by its own number", "\x1b[?1006h\x1b[?1005l", "\x1b[?1006h", "\x1b[?1006l"},
		{"alternate screen by 47, left as entered", "\x1b[?47h", "\x1b[?47h", "\x1b[?47l"},
		{"the last alternate screen mode counts", "\x1b[?1047h\x1b[?1049h", "\x1b[?1049h", "\x1b[?1049l"},
		{"modes on by default", "\x1b[?7l\x1b[?25l", "\x1b[?7l\x1b[?25l", "\x1b[?7h\x1b[?25h"},
		{"keypad by DECNKM", "\x1b[?66h", "\x1b=", "\x1b>"},
		{"RIS resets everything", "\x1b[?1049h\x1b[?1h\x1b[?1000h\x1bc", "", ""},
		{"DECSTR resets keys, paste, focus, wrap and cursor", "\x1b[?1h\x1b=\x1b[?25l\x1b[?2004h\x1b[?1004h\x1b[?7l\x1b[5 q\x1b[!p", "", ""},
		{"DECSTR keeps the screen and the mouse", "\x1b[?1049h\x1b[?1000h\x1b[!p", "\x1b[?1049h\x1b[?1000h", "\x1b[?1000l\x1b[?1049l"},
		{"kitty keyboard pushes and pops", "\x1b[>1u\x1b[>3u\x1b[>5u\x1b[<2u", "\x1b[>1u", "\x1b[<1u"},
		{"kitty pop past the stack", "\x1b[>1u\x1b[<9u", "", ""},
		{"kitty flags set with nothing pushed", "\x1b[=5;1u", "\x1b[=5;1u", "\x1b[=0;1u"},
		{"kitty flags added to the top", "\x1b[>1u\x1b[=8;2u\x1b[>2u\x1b[=2;3u", "\x1b[>9u\x1b[>0u", "\x1b[<2u"},
		{"mouse encodings set in order", "\x1b[?1015h\x1b[?1006h\x1b[?1015h", "\x1b[?1006h\x1b[?1015h", "\x1b[?1006l\x1b[?1015l"},
		{"highlight tracking is not followed", "\x1b[?1000h\x1b[?1001h", "\x1b[?1000h", "\x1b[?1000l"},
		{"a long list of modes", "\x1b[?1000;1002;1003;1006;1004;2004;1049h",
			"\x1b[?1049h\x1b[?1004h\x1b[?2004h\x1b[?1003h\x1b[?1006h", "\x1b[?1004l\x1b[?2004l\x1b[?1003l\x1b[?1006l\x1b[?1049l"},
		{"XTMODKEYS disabled", "\x1b[>4;2m\x1b[>4n", "", ""},
		{"a string's text is not a sequence", "\x1b]0;[?1049h title\x07\x1bP[?1h\x1b\\", "", ""},
		{"an ESC inside a string ends it, as in xterm.js", "\x1b]0;title\x1b[?2004h", "\x1b[?2004h", "\x1b[?2004l"},
		{"an OSC ended by ST, then a mode", "\x1b]0;t\x1b\\\x1b[?2004h", "\x1b[?2004h", "\x1b[?2004l"},
		{"CAN cancels a sequence", "\x1b[?1049\x18h\x1b[?1h", "\x1b[?1h", "\x1b[?1l"},
		{"ESC restarts a sequence", "\x1b[?10\x1b[?2004h", "\x1b[?2004h", "\x1b[?2004l"},
		{"C0 controls inside CSI run and do not end it", "\x1b[?20\n04h", "\x1b[?2004h", "\x1b[?2004l"},
		{"sub-parameters are skipped", "\x1b[?1:2;2004h", "\x1b[?1h\x1b[?2004h", "\x1b[?1l\x1b[?2004l"},
		{"an overlong CSI is ignored", "\x1b[?" + strings.Repeat("0", 200) + "1h", "", ""},
		{"other CSI sequences are not modes", "\x1b[1h\x1b[4h\x1b[2J\x1b[1;31m\x1b[>0;1q", "", ""},
		{"charset selection", "\x1b(B\x1b)0\x1b[?1h", "\x1b[?1h", "\x1b[?1l"},
		{"XTMODKEYS reset of every resource", "\x1b[>4;1m\x1b[>m", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, and split at every byte: the parser's state carries over.
			for split := 0; split <= len(tt.out); split++ {
				var m Modes
				m.Feed([]byte(tt.out[:split]))
				m.Feed([]byte(tt.out[split:]))
				if got := string(m.AppendRestore(nil)); got != tt.restore {
					t.Fatalf("split at %d: restore %q, want %q", split, got, tt.restore)
				}
				if got := string(m.AppendUndo(nil)); got != tt.undo {
					t.Fatalf("split at %d: undo %q, want %q", split, got, tt.undo)
				}
				if m.Default() != (tt.restore == "") {
					t.Fatalf("split at %d: Default() = %v with restore %q", split, m.Default(), tt.restore)
				}
			}
		})
	}
}

func TestAltScreen(t *testing.T) {
	var m Modes
	m.Feed([]byte("\x1b[?1049h"))
	if !m.AltScreen() {
		t.Fatal("AltScreen() = false after ?1049h")
	}
	m.Feed([]byte("\x1b[?1049l"))
	if m.AltScreen() {
		t.Fatal("AltScreen() = true after ?1049l")
	}
}

// checkRoundTrip checks what the package promises for any output: the
// restore sequences give a reset terminal the same modes, and the undo
// sequences take them back to a reset terminal's.
func checkRoundTrip(t *testing.T, out []byte) {
	t.Helper()
	var m Modes
	m.Feed(out)
	var fresh Modes
	fresh.Feed(m.AppendRestore(nil))
	m.p, fresh.p = parser{}, parser{}
	if fresh != m {
		t.Fatalf("restore of %q gives %+v, want %+v", out, fresh, m)
	}
	reset := m
	reset.Feed(AppendResetAll(nil))
	if !reset.Default() {
		t.Fatalf("reset of every mode after %q leaves %+v", out, reset)
	}
	m.Feed(m.AppendUndo(nil))
	if !m.Default() {
		t.Fatalf("undo of %q leaves %+v", out, m)
	}
}

func TestRestoreAndUndoRoundTrip(t *testing.T) {
	for _, out := range []string{
		"\x1b[?1049;1;7;25;66;1004;2004;1003;1015h\x1b[5 q\x1b[>4;2m\x1b[>1u\x1b[>1u",
		"\x1b[?7;25l\x1b[?9h",
		"\x1b[?1016h\x1b[?1001h",
		"\x1b[?1006;1005;1015;1016h\x1b[=3;1u\x1b[>1u\x1b[>2u\x1b[=4;2u",
	} {
		checkRoundTrip(t, []byte(out))
	}
}

func FuzzModes(f *testing.F) {
	for _, s := range []string{"\x1b[?1049h\x1b[?1;2004h", "\x1b]0;t\x07\x1b[3 q", "\x1b[>4;2m\x1b[>1u", "\x1bc\x1b=", "\x1b[?25l\x1bP+q\x1b\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		checkRoundTrip(t, out)
		// Split anywhere, the same state.
		var whole, parts Modes
		whole.Feed(out)
		for len(out) > 0 {
			n := min(len(out), 1+int(out[0]%7))
			parts.Feed(out[:n])
			out = out[n:]
		}
		if whole != parts {
			t.Fatalf("fed in parts: %+v, whole: %+v", parts, whole)
		}
	})
}

func BenchmarkFeed(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"text", "some build output without escapes, 64 bytes long.........\r\n"},
		{"coloured", "\x1b[1;32mok\x1b[0m  \x1b[34msome/path/name.go\x1b[0m\r\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out := bytes.Repeat([]byte(bc.line), 512)
			b.SetBytes(int64(len(out)))
			var m Modes
			for b.Loop() {
				m.Feed(out)
			}
		})
	}
}
