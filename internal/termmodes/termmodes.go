// Package termmodes follows the terminal modes that a program's output
// sets (alternate screen, cursor and keypad keys, mouse reporting,
// bracketed paste, cursor shape and visibility, key encodings), so that a
// view of that output which starts late can be put in those modes first,
// and a real terminal that showed it can be put back when the view ends.
//
// Only modes that change what the terminal sends back or which screen it
// draws on are followed: without them a late view types the wrong bytes
// for arrow keys, pastes and clicks, or draws a full-screen program over
// the shell's screen. Colours, margins and the cursor position are
// redrawn by the program itself and are not followed.
package termmodes

import "strconv"

// Modes is the state of the followed modes; the zero value is a terminal
// just reset. It is a value: copy it to keep a state.
type Modes struct {
	flags     uint16 // set bits: modes away from their default (see the flag constants)
	alt       uint16 // the alternate screen mode on (47, 1047, 1049), 0 for off
	mouse     uint16 // mouse reporting mode (9, 1000, 1002, 1003), 0 for none
	cursor    uint8  // cursor shape (DECSCUSR), 0 for the default
	otherKeys uint8  // xterm modifyOtherKeys level, 0 for off
	// Mouse encodings set (1005, 1006, 1015, 1016), oldest first:
	// terminals differ in which they support (xterm.js: 1006 and 1016),
	// so a restore sets them all, in order, and each takes the last it
	// knows, as it did live.
	encodings [4]uint16
	nEnc      uint8
	// Kitty keyboard flags: the stack of pushed flags, and the flags set
	// with nothing pushed.
	kitty      [maxKitty]uint8
	kittyDepth uint8
	kittyBase  uint8

	p parser
}

// maxKitty bounds the kitty keyboard stack followed; terminals keep a
// short stack and drop the oldest entries past it.
const maxKitty = 16

// Flags of modes whose default may be left: a set bit means "not as after
// a reset".
const (
	cursorKeys uint16 = 1 << iota // DECCKM (1) set: application cursor keys
	keypad                        // DECKPAM (ESC =) or DECNKM (66) set: restored as ESC =
	noWrap                        // DECAWM (7) reset
	hidden                        // DECTCEM (25) reset
	focus                         // 1004 set: focus in/out reports
	paste                         // 2004 set: bracketed paste
)

// boolModes maps the DEC private modes followed as flags; inverted ones
// are on by default.
var boolModes = [...]struct {
	n        int
	flag     uint16
	inverted bool
}{
	{1, cursorKeys, false},
	{7, noWrap, true},
	{25, hidden, true},
	{1004, focus, false},
	{2004, paste, false},
}

// Default reports whether m is the state of a terminal just reset.
func (m *Modes) Default() bool {
	return m.flags == 0 && m.alt == 0 && m.mouse == 0 && m.nEnc == 0 && m.cursor == 0 &&
		m.otherKeys == 0 && m.kittyDepth == 0 && m.kittyBase == 0
}

// AltScreen reports whether the alternate screen is on: a full-screen
// program (an editor, a pager, top) is drawing.
func (m *Modes) AltScreen() bool { return m.alt != 0 }

// AppendRestore appends to dst the sequences that take a terminal just
// reset to m: the alternate screen first (entering it may clear it),
// then the other modes.
func (m *Modes) AppendRestore(dst []byte) []byte {
	if m.alt != 0 {
		dst = appendDEC(dst, int(m.alt), true)
	}
	for _, b := range boolModes {
		if m.flags&b.flag != 0 {
			dst = appendDEC(dst, b.n, !b.inverted)
		}
	}
	if m.flags&keypad != 0 {
		dst = append(dst, "\x1b="...)
	}
	if m.mouse != 0 {
		dst = appendDEC(dst, int(m.mouse), true)
	}
	for _, e := range m.encodings[:m.nEnc] {
		dst = appendDEC(dst, int(e), true)
	}
	if m.cursor != 0 {
		dst = appendCSI(dst, "", int(m.cursor), " q")
	}
	if m.otherKeys != 0 {
		dst = appendCSI(dst, ">4;", int(m.otherKeys), "m")
	}
	if m.kittyBase != 0 {
		dst = appendCSI(dst, "=", int(m.kittyBase), ";1u")
	}
	for _, f := range m.kitty[:m.kittyDepth] {
		dst = appendCSI(dst, ">", int(f), "u")
	}
	return dst
}

// AppendUndo appends to dst the sequences that take a terminal in state m
// back to the state after a reset, the alternate screen last (leaving it
// shows the screen from before it).
func (m *Modes) AppendUndo(dst []byte) []byte {
	for _, b := range boolModes {
		if m.flags&b.flag != 0 {
			dst = appendDEC(dst, b.n, b.inverted)
		}
	}
	if m.flags&keypad != 0 {
		dst = append(dst, "\x1b>"...)
	}
	if m.mouse != 0 {
		dst = appendDEC(dst, int(m.mouse), false)
	}
	for _, e := range m.encodings[:m.nEnc] {
		dst = appendDEC(dst, int(e), false)
	}
	if m.cursor != 0 {
		dst = append(dst, "\x1b[0 q"...)
	}
	if m.otherKeys != 0 {
		dst = append(dst, "\x1b[>4;0m"...)
	}
	if m.kittyDepth != 0 {
		dst = appendCSI(dst, "<", int(m.kittyDepth), "u")
	}
	if m.kittyBase != 0 {
		dst = append(dst, "\x1b[=0;1u"...)
	}
	if m.alt != 0 {
		dst = appendDEC(dst, int(m.alt), false)
	}
	return dst
}

// AppendResetAll appends to dst the sequences that take a terminal in any
// state of the followed modes to the state after a reset (for a terminal
// whose state is not known). It leaves the alternate screen without
// restoring a cursor (1047, not 1049): none may have been saved.
func AppendResetAll(dst []byte) []byte {
	return append(dst, "\x1b[?1l\x1b[?7h\x1b[?25h\x1b[?1004l\x1b[?2004l\x1b>"+
		"\x1b[?1000l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l\x1b[0 q\x1b[>4;0m"+
		"\x1b[<"+strconv.Itoa(maxKitty)+"u\x1b[=0;1u\x1b[?1047l"...)
}

func appendDEC(dst []byte, n int, set bool) []byte {
	final := "l"
	if set {
		final = "h"
	}
	return appendCSI(dst, "?", n, final)
}

func appendCSI(dst []byte, prefix string, n int, final string) []byte {
	dst = append(dst, "\x1b["...)
	dst = append(dst, prefix...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, final...)
}

// reset is RIS (ESC c): every mode back to its default.
func (m *Modes) reset() {
	p := m.p
	*m = Modes{p: p}
}

// softReset is DECSTR (CSI ! p), as xterm.js does it.
func (m *Modes) softReset() {
	m.flags &^= hidden | cursorKeys | keypad | paste | focus | noWrap
	m.cursor = 0
}

// setDEC applies CSI ? n h (set) or l (reset).
func (m *Modes) setDEC(n int, set bool) {
	switch n {
	case 47, 1047, 1049:
		m.alt = 0
		if set {
			m.alt = uint16(n)
		}
		return
	case 9, 1000, 1002, 1003:
		// One reporting mode at a time; resetting any turns reporting off,
		// as xterm and xterm.js do. (1001, highlight tracking, is left
		// out: xterm.js ignores it, so restoring it would end reports.)
		m.mouse = 0
		if set {
			m.mouse = uint16(n)
		}
		return
	case 66: // DECNKM, the keypad mode ESC = and ESC > set
		m.setFlag(keypad, set)
		return
	case 1005, 1006, 1015, 1016:
		m.dropEncoding(uint16(n))
		if set {
			m.encodings[m.nEnc] = uint16(n)
			m.nEnc++
		}
		return
	}
	for _, b := range boolModes {
		if b.n == n {
			m.setFlag(b.flag, set != b.inverted)
			return
		}
	}
}

// dropEncoding removes e from the encodings set, keeping their order.
func (m *Modes) dropEncoding(e uint16) {
	for i, x := range m.encodings[:m.nEnc] {
		if x == e {
			copy(m.encodings[i:], m.encodings[i+1:m.nEnc])
			m.nEnc--
			m.encodings[m.nEnc] = 0
			return
		}
	}
}

func (m *Modes) setFlag(f uint16, on bool) {
	if on {
		m.flags |= f
	} else {
		m.flags &^= f
	}
}

// kittyPush is CSI > flags u.
func (m *Modes) kittyPush(flags int) {
	if m.kittyDepth == maxKitty {
		copy(m.kitty[:], m.kitty[1:]) // the oldest entry goes
		m.kittyDepth--
	}
	m.kitty[m.kittyDepth] = uint8(flags)
	m.kittyDepth++
}

// kittyPop is CSI < n u.
func (m *Modes) kittyPop(n int) {
	n = min(max(n, 1), int(m.kittyDepth))
	clear(m.kitty[int(m.kittyDepth)-n : m.kittyDepth])
	m.kittyDepth -= uint8(n)
}

// kittySet is CSI = flags ; how u: the current flags (the top of the
// stack, or those with nothing pushed) are replaced (1), or flags are
// set (2) or reset (3) in them.
func (m *Modes) kittySet(flags, how int) {
	cur := &m.kittyBase
	if m.kittyDepth > 0 {
		cur = &m.kitty[m.kittyDepth-1]
	}
	f := uint8(flags)
	switch how {
	case 0, 1:
		*cur = f
	case 2:
		*cur |= f
	case 3:
		*cur &^= f
	}
}
