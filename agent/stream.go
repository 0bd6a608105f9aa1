package agent

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Delta is one piece of a streamed model reply (Request.Stream): a piece
// of the assistant's text, or of the arguments of tool call Call (its
// Name is set on the call's first piece). Reset says the call is being
// made again (a retry after an error): the pieces so far are void.
type Delta struct {
	Reset     bool
	Content   string
	Call      int
	Name      string
	Arguments string
}

// answerStream turns a streamed reply into the final answer as it is
// written, for Hooks.Answer: the answer string of the json protocol's
// {"action": {"type": "final_answer", "answer": …}}, decoded from the
// partial JSON as it arrives, or of a tools reply's final_answer call.
//
// Nothing that states an outcome is heard before the calls of its reply
// have run: a json reply is one action, so a final answer there comes
// with no write and is heard as it grows. A tools reply may carry writes
// (gated or not) after its final_answer, and whether it does is known
// only once the reply is whole: its answer is held, and heard whole by
// end when the reply turned out to be that one call. An answer beside
// other calls is not heard at all: the engine accepts it only once the
// writes have run and succeeded, and the Outcome carries it.
type answerStream struct {
	tools bool
	hear  func(string)
	scan  *answerScanner
	names map[int]string
}

func newAnswerStream(tools bool, hear func(string)) *answerStream {
	return &answerStream{tools: tools, hear: hear, scan: newAnswerScanner("answer"), names: map[int]string{}}
}

// add takes one piece; it calls hear when the answer grew (the json
// protocol).
func (s *answerStream) add(d Delta) {
	if d.Reset {
		s.scan, s.names = newAnswerScanner("answer"), map[int]string{}
		return
	}
	piece := d.Content
	if s.tools {
		if d.Name != "" {
			s.names[d.Call] = d.Name
		}
		if d.Call != 0 || s.names[0] != ActFinalAnswer {
			return
		}
		piece = d.Arguments
	}
	if piece != "" && s.scan.write(piece) && !s.tools {
		s.hear(s.scan.value())
	}
}

// end takes the end of the reply (its calls as the model made them): a
// tools reply that is one final_answer call is heard whole now.
func (s *answerStream) end(calls []ToolCall) {
	if !s.tools || len(calls) != 1 || calls[0].Name != ActFinalAnswer || len(s.names) != 1 {
		return
	}
	if v := s.scan.value(); v != "" {
		s.hear(v)
	}
}

// PartialString returns the value, decoded so far, of the first string
// member named key in json, a JSON text that may be cut off anywhere (a
// reply still arriving): escapes are decoded (\n, \", \uXXXX with
// surrogate pairs), an escape cut off at the end is left out until it is
// whole. ok is false until the member's value has begun.
func PartialString(json, key string) (value string, ok bool) {
	sc := newAnswerScanner(key)
	sc.write(json)
	return sc.value(), sc.state >= scanValue
}

// answerScanner finds the string member key in JSON text written to it
// piece by piece, each byte looked at once, and decodes its value as it
// grows.
type answerScanner struct {
	key   string
	state int
	// In a string before the value: esc follows a backslash; name is the
	// string so far while it may still be key (long ones are not kept).
	esc     bool
	name    []byte
	long    bool
	pending string // the value's text not decoded yet (an escape cut off)
	out     strings.Builder
}

// Scanner states.
const (
	scanOutside = iota // between tokens
	scanString         // in a string that may be a member's name
	scanAfter          // after a string: a ':' makes it a name
	scanColon          // after key's ':', before its value
	scanValue          // in key's string value
	scanDone           // past the value
)

func newAnswerScanner(key string) *answerScanner { return &answerScanner{key: key} }

func (sc *answerScanner) value() string { return sc.out.String() }

// write takes the next piece of text; it reports whether the value grew.
func (sc *answerScanner) write(p string) bool {
	before := sc.out.Len()
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch sc.state {
		case scanOutside:
			if c == '"' {
				sc.state, sc.esc, sc.name, sc.long = scanString, false, sc.name[:0], false
			}
		case scanString:
			switch {
			case sc.esc:
				sc.esc = false
				sc.long = true // an escaped name is not key
			case c == '\\':
				sc.esc = true
			case c == '"':
				sc.state = scanAfter
			case len(sc.name) < len(sc.key):
				sc.name = append(sc.name, c)
			default:
				sc.long = true
			}
		case scanAfter:
			switch {
			case c == ':' && !sc.long && string(sc.name) == sc.key:
				sc.state = scanColon
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			default:
				sc.state = scanOutside
				i-- // look at it again
			}
		case scanColon:
			switch {
			case c == '"':
				sc.state = scanValue
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			default:
				sc.state = scanOutside // not a string: a later member may be
				i--
			}
		case scanValue:
			text := sc.pending + p[i:]
			v, end, whole := decodeString(text, 0)
			sc.out.WriteString(v)
			sc.pending = text[end:]
			if whole {
				sc.state, sc.pending = scanDone, ""
			}
			return sc.out.Len() > before
		case scanDone:
			return sc.out.Len() > before
		}
	}
	return sc.out.Len() > before
}

// decodeString decodes the JSON string whose text starts at s[i] (after
// its opening quote) up to its closing quote or, cut off, as far as it
// is whole; end is the index after the closing quote.
func decodeString(s string, i int) (value string, end int, whole bool) {
	var b strings.Builder
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, true
		case c != '\\':
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 && !utf8.FullRuneInString(s[i:]) {
				return b.String(), i, false // a character cut off
			}
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		if i+1 >= len(s) {
			return b.String(), i, false
		}
		switch e := s[i+1]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, size, ok := hexRune(s[i:])
			if !ok {
				return b.String(), i, false
			}
			b.WriteRune(r)
			i += size
			continue
		default: // \" \\ \/ and anything a lenient reader passes on
			b.WriteByte(e)
		}
		i += 2
	}
	return b.String(), i, false
}

// hexRune decodes \uXXXX at the start of s, with the low half of a
// surrogate pair after it; ok is false when it is cut off.
func hexRune(s string) (r rune, size int, ok bool) {
	if len(s) < 6 {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(s[2:6], 16, 16)
	if err != nil {
		return utf8.RuneError, 6, true
	}
	r = rune(v)
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if len(s) < 12 {
		return 0, 0, false
	}
	if s[6] != '\\' || s[7] != 'u' {
		return utf8.RuneError, 6, true
	}
	lo, err := strconv.ParseUint(s[8:12], 16, 16)
	if err != nil {
		return utf8.RuneError, 6, true
	}
	return utf16.DecodeRune(r, rune(lo)), 12, true
}
