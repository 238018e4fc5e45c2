package termmodes

import "bytes"

// parser states: a small subset of the DEC/xterm parser, enough to find
// where each escape sequence ends and to read the CSI sequences that set
// modes. Its state lives across Feed calls, so a sequence split between
// two reads is still followed.
const (
	ground   uint8 = iota
	escape         // after ESC
	escInter       // ESC and intermediates, until a final byte
	csi            // ESC [ and parameters, until a final byte
	str            // OSC, DCS, APC, PM, SOS: until BEL or ST
	strEsc         // ESC inside a string: ST if a backslash follows
)

const (
	esc = 0x1b
	bel = 0x07
	can = 0x18
	sub = 0x1a
)

// parser holds an escape sequence in progress.
type parser struct {
	state uint8
	n     uint8     // bytes in buf
	over  bool      // buf overflowed: the sequence is not a mode we follow
	buf   [128]byte // CSI prefix, parameters and intermediates
}

// Feed follows the modes that output b sets. Plain text costs one
// bytes.IndexByte per chunk, and a colour a few nanoseconds.
func (m *Modes) Feed(b []byte) {
	p := &m.p
	for len(b) > 0 {
		switch {
		case p.state == ground:
			i := bytes.IndexByte(b, esc)
			if i < 0 {
				return
			}
			b = b[i+1:]
			p.state = escape
		case p.state == csi:
			b = m.csiBytes(b)
		default:
			m.step(b[0])
			b = b[1:]
		}
	}
}

// csiBytes takes a CSI sequence's parameter bytes from b in one loop (most
// sequences are colours, each byte would otherwise cost a step) and
// returns the rest, after the byte that ends them.
func (m *Modes) csiBytes(b []byte) []byte {
	p := &m.p
	i := 0
	for ; i < len(b) && b[i] >= 0x20 && b[i] <= 0x3f; i++ {
		if int(p.n) < len(p.buf) {
			p.buf[p.n] = b[i]
			p.n++
		} else {
			p.over = true
		}
	}
	if i == len(b) {
		return nil
	}
	if c := b[i]; c >= 0x40 && c <= 0x7e {
		p.state = ground
		if !p.over {
			m.csiDone(p.buf[:p.n], c)
		}
	} else {
		m.step(c)
	}
	return b[i+1:]
}

// step moves the parser one byte inside a sequence.
func (m *Modes) step(c byte) {
	p := &m.p
	if c == can || c == sub {
		p.state = ground // cancels the sequence
		return
	}
	switch p.state {
	case escape:
		switch {
		case c == '[':
			p.state, p.n, p.over = csi, 0, false
		case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
			p.state = str
		case c >= 0x20 && c <= 0x2f:
			p.state = escInter
		case c == esc || c < 0x20:
			// Another ESC starts over; C0 controls run inside a sequence.
		default:
			p.state = ground
			switch c {
			case 'c': // RIS
				m.reset()
			case '=': // DECKPAM
				m.flags |= keypad
			case '>': // DECKPNM
				m.flags &^= keypad
			}
		}
	case escInter:
		switch {
		case c == esc:
			p.state = escape
		case c < 0x20 || c >= 0x20 && c <= 0x2f:
		default:
			p.state = ground
		}
	case csi: // csiBytes takes the parameters and the final byte
		switch {
		case c == esc:
			p.state = escape
		case c < 0x20 || c == 0x7f:
		default:
			p.state = ground
		}
	case str:
		switch c {
		case bel:
			p.state = ground
		case esc:
			p.state = strEsc
		}
	case strEsc:
		if c == '\\' {
			p.state = ground
			return
		}
		p.state = escape
		m.step(c)
	}
}

// csiDone applies a complete CSI sequence: body is what came between
// "ESC [" and the final byte.
func (m *Modes) csiDone(body []byte, final byte) {
	var prefix byte
	if len(body) > 0 && body[0] >= '<' && body[0] <= '?' {
		prefix, body = body[0], body[1:]
	} else if final != 'q' && final != 'p' {
		return // colours, cursor moves, erases: most of what comes here
	}
	params, inter := body, []byte(nil)
	for i, c := range body {
		if c >= 0x20 && c <= 0x2f {
			params, inter = body[:i], body[i:]
			break
		}
	}
	switch {
	case prefix == '?' && len(inter) == 0 && (final == 'h' || final == 'l'):
		for len(params) > 0 {
			var n int
			n, params = nextParam(params)
			m.setDEC(n, final == 'h')
		}
	case prefix == 0 && string(inter) == " " && final == 'q': // DECSCUSR
		n, _ := nextParam(params)
		m.cursor = uint8(min(n, 255))
	case prefix == 0 && string(inter) == "!" && final == 'p': // DECSTR
		m.softReset()
	case prefix == '>' && len(inter) == 0 && final == 'm': // XTMODKEYS
		resource, rest := nextParam(params)
		switch {
		case len(params) == 0: // every resource back to its initial value
			m.otherKeys = 0
		case resource == 4:
			v, _ := nextParam(rest) // omitted: the initial value, off
			m.otherKeys = uint8(min(v, 255))
		}
	case prefix == '>' && len(inter) == 0 && final == 'n': // XTMODKEYS off
		if n, _ := nextParam(params); n == 4 {
			m.otherKeys = 0
		}
	case prefix == '>' && len(inter) == 0 && final == 'u': // kitty keyboard: push
		n, _ := nextParam(params)
		m.kittyPush(min(n, 255))
	case prefix == '<' && len(inter) == 0 && final == 'u': // kitty keyboard: pop
		n, _ := nextParam(params)
		m.kittyPop(n)
	case prefix == '=' && len(inter) == 0 && final == 'u': // kitty keyboard: set
		flags, rest := nextParam(params)
		how, _ := nextParam(rest)
		m.kittySet(min(flags, 255), how)
	}
}

// nextParam parses the first parameter of params (0 when empty) and
// returns the rest after its ';'. Sub-parameters (after ':') are skipped.
func nextParam(params []byte) (int, []byte) {
	n := 0
	i := 0
	for ; i < len(params) && params[i] != ';'; i++ {
		if c := params[i]; c >= '0' && c <= '9' && n < 1<<20 {
			n = n*10 + int(c-'0')
		} else if c == ':' {
			for i+1 < len(params) && params[i+1] != ';' {
				i++
			}
		}
	}
	if i < len(params) {
		i++ // the ';'
	}
	return n, params[i:]
}
