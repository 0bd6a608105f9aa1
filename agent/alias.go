package agent

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Short ids. Todoist's ids are 16 opaque characters, several tokens each,
// and appear in every listing, move and observation. The model sees short
// aliases instead (t12 for a task, p3 for a project, s2 for a section),
// given at their first appearance in an observation and kept in the
// transcript (known.Aliases), so that they are stable within a run and
// across its resume. They are mapped at the edges only: observations are
// shortened as they join the conversation (runner.result) and the
// arguments of the model's calls expanded as they are queued, so the
// engine and Todoist see real ids. An alias the run never gave is left as
// it is, and is then reported unknown like any wrong id, which the model
// can repair.
//
// An alias names an object in its run only: the next run numbers its
// own. So none leaves a run: the answer, the question and its options
// (what the person sees and what becomes the history) name tasks and
// sections by their names instead (named). And the alias-shaped words
// of the history, from answers written before that rule or typed by the
// person, are never given in this run (known.Earlier): a model that
// takes "t2" from an earlier answer finds it names nothing here and is
// told why (staleHint), instead of acting on whatever this run calls t2.

// maxRawID is the longest id shown as it is: an alias would save nothing.
const maxRawID = 8

// aliasIndex is the reverse of known.Aliases (id → alias) and the number
// of aliases given per prefix, rebuilt from the transcript when missing.
type aliasIndex struct {
	byID  map[string]string
	count map[byte]int
}

func (k *known) index() *aliasIndex {
	if k.aliasIdx != nil {
		return k.aliasIdx
	}
	x := &aliasIndex{byID: make(map[string]string, len(k.Aliases)), count: map[byte]int{}}
	for a, id := range k.Aliases {
		x.byID[id] = a
		if n, err := strconv.Atoi(a[1:]); err == nil && n > x.count[a[0]] {
			x.count[a[0]] = n
		}
	}
	k.aliasIdx = x
	return x
}

// aliasPrefix is the alias prefix of a known id: t, p or s; 0 when the id
// is not one the run knows (or is short enough to show as it is).
func (k *known) aliasPrefix(id string) byte {
	if len(id) <= maxRawID {
		return 0
	}
	if _, ok := k.Tasks[id]; ok {
		return 't'
	}
	if _, ok := k.Projects[id]; ok || id == k.InboxID {
		return 'p'
	}
	if _, ok := k.Sections[id]; ok {
		return 's'
	}
	return 0
}

// alias returns id's alias, giving one if the run knows the id, or "".
func (k *known) alias(id string) string {
	x := k.index()
	if a, ok := x.byID[id]; ok {
		return a
	}
	p := k.aliasPrefix(id)
	if p == 0 {
		return ""
	}
	x.count[p]++
	a := string(p) + strconv.Itoa(x.count[p])
	for k.isID(a) || k.Earlier[a] { // short ids of a fake, earlier runs' aliases: not shadowed
		x.count[p]++
		a = string(p) + strconv.Itoa(x.count[p])
	}
	if k.Aliases == nil {
		k.Aliases = map[string]string{}
	}
	k.Aliases[a] = id
	x.byID[id] = a
	return a
}

// isID reports whether s is the id of an object the run knows.
func (k *known) isID(s string) bool {
	_, t := k.Tasks[s]
	_, p := k.Projects[s]
	_, sec := k.Sections[s]
	return t || p || sec || s == k.InboxID
}

// unalias returns the id alias s stands for, or "" (also when s is itself
// an id the run knows).
func (k *known) unalias(s string) string {
	if id, ok := k.Aliases[s]; ok && !k.isID(s) {
		return id
	}
	return ""
}

func isIDByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// shorten replaces the ids the run knows in text by their aliases.
func (k *known) shorten(text string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); {
		if !isIDByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isIDByte(text[j]) {
			j++
		}
		if j-i > maxRawID {
			if a := k.alias(text[i:j]); a != "" {
				b.WriteString(text[last:i])
				b.WriteString(a)
				last = j
			}
		}
		i = j
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// expand replaces the aliases in the id arguments of a call (keys ending
// in _id or _ids, at any depth) by the ids they stand for. Arguments with
// no alias are returned unchanged, byte for byte.
func (k *known) expand(args json.RawMessage) json.RawMessage {
	if len(k.Aliases) == 0 || len(args) == 0 {
		return args
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return args
	}
	if !k.expandValue(v, false) {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return b
}

// expandValue expands v in place; ids is set when v is the value of an id
// key. It reports whether anything changed.
func (k *known) expandValue(v any, ids bool) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for key, x := range v {
			isID := strings.HasSuffix(key, "_id") || strings.HasSuffix(key, "_ids")
			if s, ok := x.(string); ok && isID {
				if id := k.unalias(s); id != "" {
					v[key], changed = id, true
				}
				continue
			}
			changed = k.expandValue(x, isID) || changed
		}
	case []any:
		for i, x := range v {
			if s, ok := x.(string); ok && ids {
				if id := k.unalias(s); id != "" {
					v[i], changed = id, true
				}
				continue
			}
			changed = k.expandValue(x, false) || changed
		}
	}
	return changed
}

// aliasShapedWord matches the words of a text that look like aliases.
var aliasShapedWord = regexp.MustCompile(`\b[tps][0-9]+\b`)

// reserve marks the alias-shaped words of the history as an earlier
// run's: this run gives none of them.
func (k *known) reserve(hist []HistoryMessage) {
	for _, h := range hist {
		for _, w := range aliasShapedWord.FindAllString(h.Text, -1) {
			if k.Earlier == nil {
				k.Earlier = map[string]bool{}
			}
			k.Earlier[w] = true
		}
	}
}

// staleHint is the observation for an id that is an earlier run's alias,
// "" for any other.
func (k *known) staleHint(ref string) string {
	if !k.Earlier[ref] || k.Aliases[ref] != "" {
		return ""
	}
	return ref + " is a short id from an earlier message of this conversation: short ids are given anew in each run, and that one names nothing now. " +
		"Do not guess which object it meant: find it by its name in a listing of this run and use the id shown there, or ask the user"
}

// named replaces the task and section aliases of this run in text by
// the names of what they stand for, quoted: text that leaves the run
// (an answer, a question) names no alias. Project aliases are left: p1
// to p4 are also Todoist's priorities, and an earlier run's p3 is
// reserved in the next (reserve).
func (k *known) named(text string) string {
	if len(k.Aliases) == 0 {
		return text
	}
	return k.namedFrom(text, false)
}

// namedFrom is named for text that follows an open quote when quoted.
func (k *known) namedFrom(text string, quoted bool) string {
	name := func(w string) string {
		id, ok := k.Aliases[w]
		if !ok || k.isID(w) {
			return w
		}
		switch w[0] {
		case 't':
			if t, ok := k.Tasks[id]; ok && t.Content != "" {
				return `"` + t.Content + `"`
			}
		case 's':
			if sec, ok := k.Sections[id]; ok && sec.Name != "" {
				return `"` + sec.Name + `"`
			}
		}
		return w
	}
	// Quoted text is a name already ("Buy t3 cable"): only the words
	// outside quotes are aliases.
	parts := strings.Split(text, `"`)
	i := 0
	if quoted {
		i = 1
	}
	for ; i < len(parts); i += 2 {
		parts[i] = aliasShapedWord.ReplaceAllStringFunc(parts[i], name)
	}
	return strings.Join(parts, `"`)
}

// streamNamer is named for an answer heard as it grows (the json
// protocol's stream): each text extends the one before, so the part up
// to its last settled word is named once, not again with each piece.
type streamNamer struct {
	k *known
	// raw is the settled part of the text, ending after a character no
	// alias holds; out is it named, and quoted says it leaves a quote
	// open.
	raw, out string
	quoted   bool
}

// name returns k.named(text).
func (s *streamNamer) name(text string) string {
	if len(s.k.Aliases) == 0 {
		return text
	}
	if !strings.HasPrefix(text, s.raw) { // the reply began again
		s.raw, s.out, s.quoted = "", "", false
	}
	if cut := strings.LastIndexAny(text[len(s.raw):], " \t\n.,;:!?()\""); cut >= 0 {
		cut += len(s.raw) + 1
		seg := text[len(s.raw):cut]
		s.out += s.k.namedFrom(seg, s.quoted)
		s.quoted = s.quoted != (strings.Count(seg, `"`)%2 == 1)
		s.raw = text[:cut]
	}
	return s.out + s.k.namedFrom(text[len(s.raw):], s.quoted)
}
