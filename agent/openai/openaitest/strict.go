package openaitest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// CheckStrict reports why schema breaks OpenAI's rules for strict
// schemas (structured outputs and strict tools), in the words of the real
// API, or "" if it follows them: the root is an object, and every object
// schema, wherever it is nested (properties, items, prefixItems, anyOf,
// allOf, oneOf, not, $defs, definitions), has additionalProperties: false
// and lists every one of its properties in required.
func CheckStrict(schema json.RawMessage) string { return checkStrict(schema) }

// checked remembers the verdicts of checkStrict by the exact bytes of the
// schema: a client sends the same tool schemas with every request, and
// checking them again was most of the fake's CPU in the throughput
// benchmark. A verdict depends on nothing but those bytes. It holds at
// most maxChecked bytes of schemas and starts over when full.
var (
	checkedMu    sync.Mutex // protects checked and checkedBytes
	checked      = map[string]string{}
	checkedBytes int
)

const maxChecked = 4 << 20

func checkStrict(raw json.RawMessage) string {
	checkedMu.Lock()
	msg, ok := checked[string(raw)]
	checkedMu.Unlock()
	if ok {
		return msg
	}
	msg = verdict(raw)
	if len(raw) > maxChecked/8 {
		return msg // too large to keep
	}
	checkedMu.Lock()
	defer checkedMu.Unlock()
	if checkedBytes+len(raw) > maxChecked {
		clear(checked)
		checkedBytes = 0
	}
	if _, ok := checked[string(raw)]; !ok {
		checked[string(raw)] = msg
		checkedBytes += len(raw)
	}
	return msg
}

// verdict is checkStrict's answer, worked out.
func verdict(raw json.RawMessage) string {
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return "the schema is not valid JSON: " + err.Error()
	}
	m, ok := root.(map[string]any)
	if !ok || !isObject(m) {
		t := "None"
		if ok {
			if s, ok := m["type"].(string); ok {
				t = s
			}
		}
		return fmt.Sprintf(`schema must be a JSON Schema of 'type: "object"', got 'type: "%s"'.`, t)
	}
	return walkStrict(m, nil)
}

// isObject reports whether a schema describes objects.
func isObject(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	case nil:
		_, ok := m["properties"]
		return ok
	}
	return false
}

func walkStrict(m map[string]any, path []string) string {
	if isObject(m) {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return fmt.Sprintf("In context=%s, 'additionalProperties' is required to be supplied and to be false.", pyTuple(path))
		}
		props, _ := m["properties"].(map[string]any)
		req := map[string]bool{}
		list, isList := m["required"].([]any)
		if _, has := m["required"]; has && !isList {
			return fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array including every key in properties.", pyTuple(path))
		}
		for _, r := range list {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
		var missing []string
		for k := range props {
			if !req[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", pyTuple(path), missing[0])
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "properties", "$defs", "definitions":
			sub, _ := m[k].(map[string]any)
			names := make([]string, 0, len(sub))
			for n := range sub {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if s, ok := sub[n].(map[string]any); ok {
					if msg := walkStrict(s, append(slices.Clip(path), k, n)); msg != "" {
						return msg
					}
				}
			}
		case "items", "not", "additionalProperties":
			if s, ok := m[k].(map[string]any); ok {
				if msg := walkStrict(s, append(slices.Clip(path), k)); msg != "" {
					return msg
				}
			}
			if arr, ok := m[k].([]any); ok && k == "items" {
				if msg := walkList(arr, path, k); msg != "" {
					return msg
				}
			}
		case "anyOf", "allOf", "oneOf", "prefixItems":
			if arr, ok := m[k].([]any); ok {
				if msg := walkList(arr, path, k); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

func walkList(arr []any, path []string, k string) string {
	for i, v := range arr {
		if s, ok := v.(map[string]any); ok {
			if msg := walkStrict(s, append(slices.Clip(path), k, fmt.Sprint(i))); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// pyTuple renders a path the way the API does: a Python tuple.
func pyTuple(path []string) string {
	if len(path) == 0 {
		return "()"
	}
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = "'" + p + "'"
	}
	if len(q) == 1 {
		return "(" + q[0] + ",)"
	}
	return "(" + strings.Join(q, ", ") + ")"
}
