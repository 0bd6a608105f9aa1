package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// call is one action the model asked for, after parsing.
type call struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	// Confirmed is set once the user approved a gated write.
	Confirmed bool `json:"confirmed,omitempty"`
}

// replyError is a reply the engine could not use, with what to quote back
// to the model in a repair prompt.
type replyError struct {
	Problem string // what is wrong, e.g. the validation error
	Value   string // the offending value, as sent
}

func (e *replyError) Error() string { return e.Problem }

// extractJSON finds the first JSON object in text, repairing what can be
// repaired locally: prose around it, code fences, trailing commas. It
// returns the decoded object.
func extractJSON(text string) (map[string]any, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, errors.New("the reply is empty")
	}
	if m, ok := decodeObject(text); ok {
		return m, nil
	}
	// Every balanced {...} candidate, in order; the first that decodes
	// (directly or without trailing commas) wins.
	for start := strings.IndexByte(text, '{'); start >= 0; {
		end := matchBrace(text, start)
		if end < 0 {
			break
		}
		cand := text[start : end+1]
		if m, ok := decodeObject(cand); ok {
			return m, nil
		}
		if m, ok := decodeObject(stripTrailingCommas(cand)); ok {
			return m, nil
		}
		next := strings.IndexByte(text[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return nil, errors.New("the reply holds no valid JSON object")
}

func decodeObject(s string) (map[string]any, bool) {
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	// Anything but whitespace after the object means s was not one object.
	if dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return m, true
}

// matchBrace returns the index of the brace closing the one at start,
// skipping string contents, or -1.
func matchBrace(s string, start int) int {
	depth, inStr, esc := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// stripTrailingCommas removes commas directly before } or ], outside
// strings.
func stripTrailingCommas(s string) string {
	var b bytes.Buffer
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && c == ',':
			j := i + 1
			for j < len(s) && strings.IndexByte(" \t\r\n", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// envelopeKeys are names models use for the action's type and arguments
// instead of ours; they are mapped locally.
var (
	typeAliases = []string{"type", "action", "tool", "function", "name"}
	argsAliases = []string{"args", "arguments", "action_input", "parameters", "params", "input"}
)

// parseEnvelope turns a json-protocol reply into its thought and call.
func parseEnvelope(text string) (thought string, c call, err error) {
	m, err := extractJSON(text)
	if err != nil {
		return "", call{}, &replyError{Problem: err.Error(), Value: text}
	}
	thought, _ = m["thought"].(string)
	var act map[string]any
	switch a := m["action"].(type) {
	case map[string]any:
		act = a
	case string:
		// {"thought": …, "action": "move_tasks", "action_input": {…}}
		act = map[string]any{"type": a}
		nested := false
		for _, k := range argsAliases {
			if args, ok := m[k].(map[string]any); ok {
				for ak, av := range args {
					act[ak] = av
				}
				nested = true
				break
			}
		}
		if !nested {
			// {"action": "create_project", "name": "Trip"}
			for k, v := range m {
				if k != "action" && k != "thought" {
					act[k] = v
				}
			}
		}
	default:
		if _, ok := m["type"].(string); ok {
			// The action itself, without an envelope.
			act = m
			delete(act, "thought")
		}
	}
	if act == nil {
		return thought, call{}, &replyError{Problem: `the reply has no "action" object`, Value: compact(m)}
	}
	name := actionType(act)
	if name == "" {
		return thought, call{}, &replyError{Problem: `the action has no "type"`, Value: compact(act)}
	}
	// Arguments nested under an alias key are lifted.
	for _, k := range argsAliases {
		if args, ok := act[k].(map[string]any); ok && len(act) == 1 {
			act = args
			break
		}
	}
	args, err := checkArgs(name, act)
	if err != nil {
		return thought, call{}, err
	}
	return thought, call{Name: name, Args: args}, nil
}

// actionType removes and returns the action's name from act: "type", or
// an alias holding a known action name, or an alias other than "name"
// (which is also an argument of some actions).
func actionType(act map[string]any) string {
	pick := func(ok func(k, v string) bool) string {
		for _, k := range typeAliases {
			if v, isStr := act[k].(string); isStr && v != "" && ok(k, v) {
				delete(act, k)
				return v
			}
		}
		return ""
	}
	if v := pick(func(k, _ string) bool { return k == "type" }); v != "" {
		return v
	}
	if v := pick(func(_, v string) bool { _, known := actionByName(v); return known }); v != "" {
		return v
	}
	return pick(func(k, _ string) bool { return k != "name" })
}

// parseToolCall checks one native tool call.
func parseToolCall(tc ToolCall) (call, error) {
	args := map[string]any{}
	if strings.TrimSpace(tc.Arguments) != "" {
		m, err := extractJSON(tc.Arguments)
		if err != nil {
			return call{}, &replyError{Problem: "the arguments are not a JSON object: " + err.Error(), Value: tc.Arguments}
		}
		args = m
	}
	raw, err := checkArgs(tc.Name, args)
	if err != nil {
		return call{}, err
	}
	return call{ID: tc.ID, Name: tc.Name, Args: raw}, nil
}

// checkArgs validates arguments for an action, after mapping argument
// names that differ from ours only in case or separators.
func checkArgs(name string, args map[string]any) (json.RawMessage, error) {
	def, ok := actionByName(name)
	if !ok {
		problem := fmt.Sprintf("there is no action %q", clip(name, maxQuoted))
		if len(name) <= maxQuoted {
			if near := closest(name, ActionNames()); near != "" {
				problem += fmt.Sprintf(" (did you mean %q?)", near)
			}
		}
		return nil, &replyError{Problem: problem, Value: compact(args)}
	}
	fixKeys(args, getSchemas().parsed[name])
	if err := validateArgs(name, any(args)); err != nil {
		return nil, &replyError{Problem: clip(fmt.Sprintf("invalid arguments for %s: %v", name, err), 3*maxQuoted), Value: compact(args)}
	}
	out, err := json.Marshal(args)
	if err != nil {
		return nil, &replyError{Problem: err.Error(), Value: compact(args)}
	}
	// Decoding into the struct cannot fail for valid arguments, but check.
	if err := json.Unmarshal(out, def.New()); err != nil {
		return nil, &replyError{Problem: fmt.Sprintf("invalid arguments for %s: %v", name, err), Value: string(out)}
	}
	return out, nil
}

// fixKeys renames keys of v that match a schema property only up to case
// and separators ("taskId" → "task_id"), recursively.
func fixKeys(v any, schema map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		props := schemaProps(schema)
		if props == nil {
			return
		}
		for k, val := range x {
			if _, ok := props[k]; ok {
				continue
			}
			for p := range props {
				if _, taken := x[p]; !taken && normKey(p) == normKey(k) {
					x[p] = val
					delete(x, k)
					break
				}
			}
		}
		for k, val := range x {
			if ps, ok := props[k].(map[string]any); ok {
				fixKeys(val, ps)
			}
		}
	case []any:
		items, _ := unwrapNullable(schema)["items"].(map[string]any)
		for _, e := range x {
			fixKeys(e, items)
		}
	}
}

func schemaProps(schema map[string]any) map[string]any {
	props, _ := unwrapNullable(schema)["properties"].(map[string]any)
	return props
}

// unwrapNullable returns the non-null branch of an anyOf [T, null].
func unwrapNullable(schema map[string]any) map[string]any {
	if branches, ok := schema["anyOf"].([]any); ok {
		for _, b := range branches {
			if bm, ok := b.(map[string]any); ok && bm["type"] != "null" {
				return bm
			}
		}
	}
	return schema
}

func normKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == ' ' {
			return -1
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, k)
}

// maxQuoted is the most of a model's unusable value quoted back to it.
const maxQuoted = 300

// compact renders v as short JSON for quoting back to the model.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return clip(fmt.Sprint(v), maxQuoted)
	}
	return clip(string(b), maxQuoted)
}

// clip shortens s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a likely typo or rewording, else "".
func closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(s)/3) {
		return best
	}
	return ""
}

// closeMatches returns up to n candidates nearest to s.
func closeMatches(s string, candidates []string, n int) []string {
	type scored struct {
		c string
		d int
	}
	var all []scored
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(ls, lc)
		if strings.Contains(lc, ls) || strings.Contains(ls, lc) {
			d = 0
		}
		if d <= max(2, len(s)/2) {
			all = append(all, scored{c, d})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].c)
	}
	return out
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
