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
// written, for Hooks.Answer: the answer string of a final_answer call's
// arguments (tools protocol) or of the reply's {"action": {"type":
// "final_answer", "answer": …}} (json protocol), decoded from the
// partial JSON as it arrives.
type answerStream struct {
	tools bool
	hear  func(string)
	// content and args are the reply so far; names the calls' names.
	content strings.Builder
	args    map[int]*strings.Builder
	names   map[int]string
	last    string
}

func newAnswerStream(tools bool, hear func(string)) *answerStream {
	return &answerStream{tools: tools, hear: hear, args: map[int]*strings.Builder{}, names: map[int]string{}}
}

// add takes one piece; it calls hear when the answer grew.
func (s *answerStream) add(d Delta) {
	if d.Reset {
		s.content.Reset()
		s.args, s.names = map[int]*strings.Builder{}, map[int]string{}
		return
	}
	var text string
	var ok bool
	if s.tools {
		if d.Name != "" {
			s.names[d.Call] = d.Name
		}
		if d.Arguments == "" || s.names[d.Call] != "final_answer" {
			return
		}
		b := s.args[d.Call]
		if b == nil {
			b = &strings.Builder{}
			s.args[d.Call] = b
		}
		b.WriteString(d.Arguments)
		text, ok = PartialString(b.String(), "answer")
	} else {
		if d.Content == "" {
			return
		}
		s.content.WriteString(d.Content)
		text, ok = PartialString(s.content.String(), "answer")
	}
	if !ok || text == s.last {
		return
	}
	s.last = text
	s.hear(text)
}

// PartialString returns the value, decoded so far, of the first string
// member named key in json, a JSON text that may be cut off anywhere (a
// reply still arriving): escapes are decoded (\n, \", \uXXXX with
// surrogate pairs), an escape cut off at the end is left out until it is
// whole. ok is false until the member's value has begun.
func PartialString(json, key string) (value string, ok bool) {
	i := 0
	n := len(json)
	for i < n {
		c := json[i]
		if c != '"' {
			i++
			continue
		}
		s, end, whole := decodeString(json, i+1)
		if !whole {
			return "", false // a key or value cut off: not the answer's yet
		}
		i = end
		j := skipSpace(json, i)
		if j >= n || json[j] != ':' {
			continue // a value, not a member's name
		}
		if s != key {
			i = j + 1
			continue
		}
		j = skipSpace(json, j+1)
		if j >= n {
			return "", false // not begun
		}
		if json[j] != '"' {
			i = j // not a string: a later member may be
			continue
		}
		v, _, _ := decodeString(json, j+1)
		return v, true
	}
	return "", false
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
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
