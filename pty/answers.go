package pty

import "time"

// When a program asks its terminal something (the cursor position, the
// device attributes, the colours), every viewer's terminal emulator
// answers, and the answers are typed into the program: with two browser
// tabs on one terminal, the program reads its answer and then a second
// one as if typed (bash then runs "1;2c" as a command). So the first
// viewer to answer answers alone, for as long as it goes on answering
// within answerWindow of its last answer: the others' answers meanwhile
// are dropped, their keys are not. A viewer that types but has no
// emulator (a script, an agent) never answers, and takes nothing from
// one that does.

// answerWindow is how long the viewer that answered last keeps the role:
// the others' answers to the same query come within it.
const answerWindow = 3 * time.Second

// dropAnswers returns p without the query answers in it. It looks at
// whole sequences within p: a terminal emulator sends an answer in one
// piece.
func dropAnswers(p []byte) (kept []byte) {
	kept = p[:0:0]
	for i := 0; i < len(p); {
		n := answerLen(p[i:])
		if n > 0 {
			i += n
			continue
		}
		j := i + 1
		for j < len(p) && p[j] != 0x1b {
			j++
		}
		kept = append(kept, p[i:j]...)
		i = j
	}
	return kept
}

// answerLen returns the length of the query answer p starts with, or 0.
func answerLen(p []byte) int {
	if len(p) < 3 || p[0] != 0x1b {
		return 0
	}
	switch p[1] {
	case '[':
		return csiAnswerLen(p)
	case ']', 'P':
		return stringAnswerLen(p)
	}
	return 0
}

// csiAnswerLen recognises the CSI answers: device attributes (CSI ? … c,
// CSI > … c), cursor position (CSI row;col R, CSI ? row;col R), status
// (CSI … n), mode reports (CSI ? … $ y), window reports (CSI … t) and the
// kitty keyboard flags (CSI ? … u). A key sends none of these shapes,
// except a modified F3 that some terminals send as CSI 1;mod R (lost
// only when another viewer answered a query within answerWindow).
func csiAnswerLen(p []byte) int {
	i := 2
	private := byte(0)
	if i < len(p) && (p[i] == '?' || p[i] == '>' || p[i] == '=') {
		private = p[i]
		i++
	}
	params := 0
	for i < len(p) && (p[i] >= '0' && p[i] <= '9' || p[i] == ';' || p[i] == ':') {
		params++
		i++
	}
	dollar := i < len(p) && p[i] == '$'
	if dollar {
		i++
	}
	if i >= len(p) {
		return 0
	}
	final := p[i]
	switch {
	case final == 'c' && (private == '?' || private == '>') && !dollar,
		final == 'R' && params > 0 && !dollar && private != '>',
		final == 'n' && params > 0 && !dollar && private != '>',
		final == 'y' && dollar && params > 0,
		final == 't' && params > 0 && private == 0 && !dollar,
		final == 'u' && private == '?' && !dollar:
		return i + 1
	}
	return 0
}

// stringAnswerLen recognises the OSC answers (colours, OSC 4/10/11/12,
// and the clipboard, OSC 52) and the DCS ones (DECRQSS, XTVERSION, DA3),
// ended by ST or BEL.
func stringAnswerLen(p []byte) int {
	body := 2
	end := -1
	for i := body; i < len(p); i++ {
		if p[i] == 0x07 {
			end = i + 1
			break
		}
		if p[i] == 0x1b {
			if i+1 < len(p) && p[i+1] == '\\' {
				end = i + 2
			}
			break
		}
	}
	if end < 0 {
		return 0
	}
	s := string(p[body:end])
	if p[1] == ']' {
		for _, prefix := range []string{"4;", "10;", "11;", "12;", "52;"} {
			if len(s) > len(prefix) && s[:len(prefix)] == prefix {
				return end
			}
		}
		return 0
	}
	for _, prefix := range []string{"1$r", "0$r", ">|", "!|"} {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			return end
		}
	}
	return 0
}
