package pty

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestDropQueriesRemovesOnlyQueries(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text", "hello\r\n", "hello\r\n"},
		{"DA1", "a\x1b[cb", "ab"},
		{"DA1 with 0", "a\x1b[0cb", "ab"},
		{"DA2", "a\x1b[>cb\x1b[>0c", "ab"},
		{"DA3", "\x1b[=c", ""},
		{"DECID", "x\x1bZy", "xy"},
		{"DSR status", "\x1b[5n", ""},
		{"CPR", "x\x1b[6ny", "xy"},
		{"DEC DSR", "\x1b[?6n\x1b[?15n", ""},
		{"XTVERSION", "\x1b[>0q\x1b[>q", ""},
		{"DECRQM", "\x1b[?2004$p\x1b[4$p", ""},
		{"OSC 11 query BEL", "a\x1b]11;?\x07b", "ab"},
		{"OSC 10 query ST", "a\x1b]10;?\x1b\\b", "ab"},
		{"OSC 4 palette query", "\x1b]4;1;?\x07", ""},
		{"OSC 52 clipboard query", "\x1b]52;c;?\x07", ""},
		{"DECRQSS", "\x1bP$qm\x1b\\", ""},
		{"XTGETTCAP", "\x1bP+q544e\x1b\\", ""},
		{"window size report", "\x1b[18t\x1b[14t", ""},
		{"kitty keyboard query", "\x1b[?u", ""},
		{"keeps SGR", "\x1b[1;31mred\x1b[0m", "\x1b[1;31mred\x1b[0m"},
		{"keeps cursor style", "\x1b[2 q", "\x1b[2 q"},
		{"keeps modifyOtherKeys reset", "\x1b[>4n", "\x1b[>4n"},
		{"keeps title", "\x1b]0;title\x07", "\x1b]0;title\x07"},
		{"keeps colour set", "\x1b]11;#000000\x07", "\x1b]11;#000000\x07"},
		{"keeps window ops", "\x1b[8;24;80t", "\x1b[8;24;80t"},
		{"keeps alt screen", "\x1b[?1049h", "\x1b[?1049h"},
		{"keeps incomplete tail", "ab\x1b[6", "ab\x1b[6"},
		{"keeps charset", "\x1b(B", "\x1b(B"},
		{"mixed", "1\x1b[6n2\x1b[m3\x1b]11;?\x074", "12\x1b[m34"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(dropQueries([]byte(tc.in))); got != tc.want {
				t.Fatalf("dropQueries(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// xterm.js takes the C1 controls U+0090..U+009F (UTF-8 C2 90..C2 9F) as
// the 7-bit introducers: queries written with them are answered too.
func TestQueriesWithC1IntroducersAreDropped(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"CSI CPR", "q\u009b6nr", "qr"},
		{"CSI DA1", "\u009bc", ""},
		{"OSC query, C1 ST", "a\u009d11;?\u009cb", "ab"},
		{"OSC query, BEL", "a\u009d11;?\ab", "ab"},
		{"DCS DECRQSS", "\u0090$qm\u009c", ""},
		{"keeps C1 SGR, as 7-bit", "\u009b31mred", "\x1b[31mred"},
		{"keeps other C1 and text", "é\u0085ü", "é\u0085ü"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.in)
			sevenBitC1(b)
			if len(b) != len(tc.in) {
				t.Fatalf("length changed: %d, want %d", len(b), len(tc.in))
			}
			if got := string(dropQueries(b)); got != tc.want {
				t.Fatalf("dropQueries(sevenBitC1(%q)) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestAlignStartFindsBoundary(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		at    int
		known bool
		want  int
	}{
		{"start of text", "hello", 0, true, 0},
		{"middle of ascii", "hello", 2, true, 2},
		{"inside UTF-8", "a世b", 2, true, 4},
		{"inside CSI", "ab\x1b[31mc", 4, true, 7},
		{"after CSI", "ab\x1b[31mc", 7, true, 7},
		{"inside OSC", "x\x1b]0;a title\x07y", 6, true, 13},
		{"inside OSC with ST", "x\x1b]0;t\x1b\\y", 4, true, 8},
		{"open sequence at end", "x\x1b]0;still open", 5, true, 15},
		{"unknown: to first ESC", "31mabc\x1b[0mdef", 0, false, 6},
		{"unknown: past first newline", "tle\x07\r\nprompt", 0, false, 6},
		{"unknown: no anchor, UTF-8", "\x96\x8cabc", 0, false, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := alignStart([]byte(tc.in), tc.at, tc.known); got != tc.want {
				t.Fatalf("alignStart(%q, %d, %v) = %d, want %d", tc.in, tc.at, tc.known, got, tc.want)
			}
		})
	}
}

func FuzzReplayFilter(f *testing.F) {
	f.Add([]byte("a\x1b[6nb\x1b]11;?\x07c世"), 3)
	f.Add([]byte("\x1bP$qm\x1b\\x"), 1)
	f.Fuzz(func(t *testing.T, b []byte, at int) {
		if at < 0 || at > len(b) {
			return
		}
		i := alignStart(b, at, true)
		if i < at || i > len(b) {
			t.Fatalf("alignStart out of range: %d", i)
		}
		in := bytes.Clone(b[i:]) // dropQueries works in place
		out := dropQueries(b[i:])
		if len(out) > len(in) {
			t.Fatalf("dropQueries grew the input")
		}
		if utf8.Valid(in) && !utf8.Valid(out) {
			t.Fatalf("dropQueries broke UTF-8: %q -> %q", in, out)
		}
		if !bytes.Contains(in, []byte{esc}) && !bytes.Equal(out, in) {
			t.Fatalf("text without ESC changed")
		}
		if e := openTail(in); e < len(in) && (in[e] != esc || seqLen(in[e:]) >= 0) {
			t.Fatalf("openTail(%q) = %d: not an open sequence", in, e)
		}
	})
}
