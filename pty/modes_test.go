package pty

import (
	"fmt"
	"strings"
	"testing"

	"github.com/muxd/muxd/internal/termmodes"
)

// fullScreen is a perl program playing a full-screen one: it enters the
// alternate screen and sets key modes, draws more than the ring keeps,
// then prints a tick every 20 ms and "REDRAWN-n" on each SIGWINCH, for
// at most 30 s.
const fullScreen = `$| = 1; my $n = 0; $SIG{WINCH} = sub { $n++; print "REDRAWN-$n\n" };
print "WAITING\n"; my $go = <STDIN>;
print "\e[?1049h\e[?1h\e[?2004h\e="; print(("x" x 79) . "\n") for 1 .. 2000; print "READY\n";
for my $i (1 .. 1500) { print "TICK-$i\n"; select(undef, undef, undef, 0.02) }`

func TestLateViewerGetsTheModesSetBeforeItsReplay(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10})
	term, err := m.Create(CreateOptions{Shell: "perl", Args: []string{"-e", fullScreen}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// It draws once the first viewer is there: on a busy machine a
	// viewer attached after the drawing left the ring would make it
	// redraw, and the redraws counted below would be off by one.
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "WAITING")
	typeLine(t, term, "")
	c.waitFor(t, "READY")
	c.waitFor(t, "TICK-2")
	const restore = "\x1b[?1049h\x1b[?1h\x1b[?2004h\x1b="

	// A new viewer: the modes, then the retained bytes, and the program
	// is asked to redraw (its first drawing is gone from the ring).
	fresh := attach(t, term, AttachOptions{From: -1})
	fresh.waitSync(t)
	if r := fresh.replayString(); !strings.HasPrefix(r, restore) || strings.Count(r, "\x1b[?1049h") != 1 {
		t.Fatalf("replay starts %q, want the modes %q once, first", r[:min(len(r), 40)], restore)
	}
	fresh.waitFor(t, "REDRAWN-1")
	// A redraw is a SIGWINCH or two (the rows shrink for a moment, and
	// come back): count them once it is over.
	tick := lastTick(fresh.liveString())
	fresh.waitFor(t, fmt.Sprintf("TICK-%d\r", tick+6))
	redraws := strings.Count(fresh.liveString(), "REDRAWN-")

	// A viewer resuming where another stopped already has the modes: no
	// restore, no redraw. A read-only viewer gets the modes but sends no
	// signal. The ticks show time passing for a wrong signal to be
	// answered.
	resumed := attach(t, term, AttachOptions{From: fresh.syncOffset()})
	resumed.waitSync(t)
	if r := resumed.replayString(); strings.Contains(r, "\x1b[?1049h") {
		t.Fatalf("a resumed replay restores modes: %q", r[:min(len(r), 40)])
	}
	watcher := attach(t, term, AttachOptions{From: -1, ReadOnly: true})
	watcher.waitSync(t)
	if r := watcher.replayString(); !strings.HasPrefix(r, restore) {
		t.Fatalf("read-only replay starts %q, want %q", r[:min(len(r), 40)], restore)
	}
	tick = lastTick(fresh.liveString())
	fresh.waitFor(t, fmt.Sprintf("TICK-%d\r", tick+6))
	if s := fresh.liveString(); strings.Count(s, "REDRAWN-") != redraws {
		t.Fatalf("a resumed or read-only viewer made the program redraw: %q", s[max(0, len(s)-200):])
	}

	// A viewer asking for bytes the ring lost: a gap, then its modes
	// undone whatever they were, then the modes.
	lost := attach(t, term, AttachOptions{From: 0})
	lost.waitSync(t)
	if ks := lost.kinds(); ks[0] != EventGap {
		t.Fatalf("events %v, want a gap first", ks)
	}
	if r, want := lost.replayString(), string(termmodes.AppendResetAll(nil))+restore; !strings.HasPrefix(r, want) {
		t.Fatalf("replay after a gap starts %q, want %q", r[:min(len(r), len(want)+10)], want)
	}
	fresh.waitFor(t, fmt.Sprintf("REDRAWN-%d", redraws+1))
}

// lessLike redraws, as less does, only when a SIGWINCH brings a size other
// than the one it drew for, and says so.
const lessLike = `$| = 1; my $last = "24 80"; $SIG{WINCH} = sub { my $s = ` + "`stty size`" + `; chomp $s; if ($s ne $last) { $last = $s; print "SIZE-$s\n" } };
print "\e[?1049h"; print(("x" x 79) . "\n") for 1 .. 2000; print "READY\n";
for my $i (1 .. 1500) { print "TICK-$i\n"; select(undef, undef, undef, 0.02) }`

// A program that redraws only on a new size is made to redraw too: the
// rows shrink by one for a moment, then come back, and the recorded size
// never changes.
func TestRedrawReachesAProgramThatWantsANewSize(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10})
	term, err := m.Create(CreateOptions{Shell: "perl", Args: []string{"-e", lessLike}, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "TICK-2")
	attach(t, term, AttachOptions{From: -1}) // its replay lost the start: a redraw
	c.waitFor(t, "SIZE-23 80")
	c.waitFor(t, "SIZE-24 80")
	if info := term.Info(); info.Cols != 80 || info.Rows != 24 {
		t.Fatalf("size %dx%d after the redraw, want 80x24", info.Cols, info.Rows)
	}
}

// A program that draws on the normal screen gets neither a restore nor a
// redraw, however much output the ring lost.
func TestLateViewerOfPlainOutputGetsNoModes(t *testing.T) {
	m := newTestManager(t, Config{RingSize: 64 << 10})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `printf '\033[1;31m%s\033[0m\n' {1..9000}; echo done-$((1+1))`)
	c.waitFor(t, "done-2")
	late := attach(t, term, AttachOptions{From: -1})
	late.waitSync(t)
	if r := late.replayString(); strings.HasPrefix(r, "\x1b[?") || strings.HasPrefix(r, "\x1b=") {
		t.Fatalf("replay of plain output starts with modes: %q", r[:min(len(r), 40)])
	}
	// One that lost bytes may have had modes set in them (a program that
	// ended since): they are undone.
	lost := attach(t, term, AttachOptions{From: 0})
	lost.waitSync(t)
	reset := string(termmodes.AppendResetAll(nil))
	if r := lost.replayString(); !strings.HasPrefix(r, reset) || strings.HasPrefix(r[len(reset):], "\x1b[?") {
		t.Fatalf("replay after a gap starts %q, want %q and no modes", r[:min(len(r), len(reset)+10)], reset)
	}
}

// A viewer that keeps its screen across terminals (the SandboxAddon
// reconnecting to a fresh shell after `exit`) asks for every mode to be
// reset ahead of the replay: else it stays in the alternate screen and
// mouse modes of the program it last showed, and every click types
// escape codes into the new shell. Others get no such prefix.
func TestResetModesPrefixesAFreshTerminalsReplay(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `echo ready-$((1+1))`)
	c.waitFor(t, "ready-2")
	reset := string(termmodes.AppendResetAll(nil))
	fresh := attach(t, term, AttachOptions{From: -1, ResetModes: true})
	fresh.waitSync(t)
	if r := fresh.replayString(); !strings.HasPrefix(r, reset) || !strings.Contains(r, "ready-2") {
		t.Fatalf("replay with ResetModes starts %q, want %q then the output", r[:min(len(r), len(reset)+10)], reset)
	}
	plain := attach(t, term, AttachOptions{From: -1})
	plain.waitSync(t)
	if r := plain.replayString(); strings.HasPrefix(r, reset) {
		t.Fatalf("replay without ResetModes starts with a reset: %q", r[:min(len(r), 40)])
	}
	// With a cursor the viewer has seen the output: no reset.
	seen := attach(t, term, AttachOptions{From: c.syncOffset(), ResetModes: true})
	seen.waitSync(t)
	if r := seen.replayString(); strings.HasPrefix(r, reset) {
		t.Fatalf("replay from a cursor with ResetModes starts with a reset")
	}
}

// A replay carries no query written with C1 introducers either: xterm.js
// would answer them into the shell.
func TestReplayDropsC1Queries(t *testing.T) {
	m := newTestManager(t, Config{})
	term := startBash(t, m, "")
	c := attach(t, term, AttachOptions{From: -1})
	typeLine(t, term, `printf 'q\302\2336n\302\233c\302\23511;?\007mark-%s\n' $((1+2))`)
	c.waitFor(t, "mark-3")
	late := attach(t, term, AttachOptions{From: -1})
	late.waitSync(t)
	r := late.replayString()
	for _, q := range []string{"\u009b6n", "\u009bc", "\u009d11;?\a", "\x1b[6n", "\x1b[c", "\x1b]11;?\a"} {
		if strings.Contains(r, q) {
			t.Errorf("replay holds the query %q", q)
		}
	}
	if !strings.Contains(r, "qmark-3") {
		t.Errorf("replay lost the text around the queries: %q", r)
	}
}

// lastTick is the number of the last complete TICK line in s.
func lastTick(s string) int {
	i := strings.LastIndex(s, "TICK-")
	n := 0
	if i >= 0 {
		_, _ = fmt.Sscanf(s[i:], "TICK-%d", &n) // Best effort: 0 if cut.
	}
	return n
}

// The replay is read a piece at a time: a query cut between its ESC and
// the backslash of its ST is still dropped whole. A viewer resuming from
// inside a long sequence (an OSC 52 payload) gets the rest of it: its
// terminal is in the middle of it.
func TestReplayPiecesKeepSequencesWhole(t *testing.T) {
	tests := []struct {
		name   string
		script string
		from   int64
		wait   string
		absent string
		want   string
		prefix string
	}{
		{"ST cut by the piece", `print "x" x 4089, "\e]11;?\e\\", "tail\n"; sleep 30`, -1, "tail", "\x1b]11;?", "tail", ""},
		{"resume inside a long OSC", `print "abc\e]52;c;", "Q" x 10000, "\a", "after\n"; sleep 30`, 20, "after", "abc", "Q\aafter", strings.Repeat("Q", 9990)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Config{})
			term, err := m.Create(CreateOptions{Shell: "perl", Args: []string{"-e", "$| = 1; " + tc.script}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			c := attach(t, term, AttachOptions{From: -1})
			c.waitFor(t, tc.wait)
			late := attach(t, term, AttachOptions{From: tc.from})
			late.waitSync(t)
			if r := late.replayString(); strings.Contains(r, tc.absent) || !strings.Contains(r, tc.want) || !strings.HasPrefix(r, tc.prefix) {
				t.Fatalf("replay from %d holds %q: %v, or lacks %q, or does not start with %d bytes of %.10q (%d bytes: %.20q)", tc.from, tc.absent, strings.Contains(r, tc.absent), tc.want, len(tc.prefix), tc.prefix, len(r), r)
			}
		})
	}
}

// TestResumeIsExact: a viewer resuming from an offset within the retained
// output gets exactly the bytes from there, in the middle of a character
// or a sequence too: its terminal holds the bytes before.
func TestResumeIsExact(t *testing.T) {
	m := newTestManager(t, Config{})
	term, err := m.Create(CreateOptions{Shell: "perl", Args: []string{"-e", `$| = 1; print "MARK\303\251\e[31mZ\e[0mEND\n"; sleep 30`}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	c := attach(t, term, AttachOptions{From: -1})
	c.waitFor(t, "END")
	for _, tc := range []struct {
		from int64
		want string
	}{
		{5, "\xa9\x1b[31mZ\x1b[0mEND"}, // the second byte of é
		{7, "[31mZ\x1b[0mEND"},         // after the ESC of ESC [31m
		{0, "MARK\u00e9\x1b[31mZ"},
	} {
		late := attach(t, term, AttachOptions{From: tc.from})
		late.waitSync(t)
		if r := late.replayString(); !strings.HasPrefix(r, tc.want) {
			t.Errorf("replay from %d: %q, want it to start with %q", tc.from, r, tc.want)
		}
	}
}
