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
	flags      uint16 // set bits: modes away from their default (see the flag constants)
	mouse      uint16 // mouse reporting mode (9, 1000-1003), 0 for none
	encoding   uint16 // mouse encoding (1005, 1006, 1015, 1016), 0 for the default
	cursor     uint8  // cursor shape (DECSCUSR), 0 for the default
	otherKeys  uint8  // xterm modifyOtherKeys level, 0 for off
	kittyDepth uint8  // kitty keyboard flags pushed and not yet popped

	p parser
}

// Flags of modes whose default may be left: a set bit means "not as after
// a reset".
const (
	altScreen  uint16 = 1 << iota // 47, 1047, 1049 set
	cursorKeys                    // DECCKM (1) set: application cursor keys
	keypad                        // DECKPAM (ESC =) or DECNKM (66) set
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
	{66, keypad, false},
	{1004, focus, false},
	{2004, paste, false},
}

// Default reports whether m is the state of a terminal just reset.
func (m *Modes) Default() bool {
	return m.flags == 0 && m.mouse == 0 && m.encoding == 0 && m.cursor == 0 && m.otherKeys == 0 && m.kittyDepth == 0
}

// AltScreen reports whether the alternate screen is on: a full-screen
// program (an editor, a pager, top) is drawing.
func (m *Modes) AltScreen() bool { return m.flags&altScreen != 0 }

// AppendRestore appends to dst the sequences that take a terminal just
// reset to m: the alternate screen first (entering it clears it), then
// the other modes.
func (m *Modes) AppendRestore(dst []byte) []byte {
	if m.flags&altScreen != 0 {
		dst = append(dst, "\x1b[?1049h"...)
	}
	for _, b := range boolModes {
		if m.flags&b.flag != 0 && b.n != 66 {
			dst = appendDEC(dst, b.n, !b.inverted)
		}
	}
	if m.flags&keypad != 0 {
		dst = append(dst, "\x1b="...)
	}
	if m.mouse != 0 {
		dst = appendDEC(dst, int(m.mouse), true)
	}
	if m.encoding != 0 {
		dst = appendDEC(dst, int(m.encoding), true)
	}
	if m.cursor != 0 {
		dst = appendCSI(dst, "", int(m.cursor), " q")
	}
	if m.otherKeys != 0 {
		dst = appendCSI(dst, ">4;", int(m.otherKeys), "m")
	}
	for range m.kittyDepth {
		dst = append(dst, "\x1b[>1u"...) // the flags are not followed: disambiguate, the least
	}
	return dst
}

// AppendUndo appends to dst the sequences that take a terminal in state m
// back to the state after a reset, the alternate screen last (leaving it
// restores the shell's screen and cursor).
func (m *Modes) AppendUndo(dst []byte) []byte {
	for _, b := range boolModes {
		if m.flags&b.flag != 0 && b.n != 66 {
			dst = appendDEC(dst, b.n, b.inverted)
		}
	}
	if m.flags&keypad != 0 {
		dst = append(dst, "\x1b>"...)
	}
	if m.mouse != 0 {
		dst = appendDEC(dst, int(m.mouse), false)
	}
	if m.encoding != 0 {
		dst = appendDEC(dst, int(m.encoding), false)
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
	if m.flags&altScreen != 0 {
		dst = append(dst, "\x1b[?1049l"...)
	}
	return dst
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

// setDEC applies CSI ? n h (set) or l (reset).
func (m *Modes) setDEC(n int, set bool) {
	switch n {
	case 47, 1047, 1049:
		m.setFlag(altScreen, set)
		return
	case 9, 1000, 1001, 1002, 1003:
		// One reporting mode at a time; resetting any turns reporting off,
		// as xterm and xterm.js do.
		m.mouse = 0
		if set {
			m.mouse = uint16(n)
		}
		return
	case 1005, 1006, 1015, 1016:
		switch {
		case set:
			m.encoding = uint16(n)
		case m.encoding == uint16(n):
			m.encoding = 0
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

func (m *Modes) setFlag(f uint16, on bool) {
	if on {
		m.flags |= f
	} else {
		m.flags &^= f
	}
}
