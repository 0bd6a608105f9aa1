package openai

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/agent"
)

// nonCore are the JSON Schema keywords that strict mode on OpenAI's own
// models accepts but fine-tuned models and many OpenAI-compatible servers
// reject ("'maxItems' is not permitted"); the strict-core level leaves
// them out. What remains (type, properties, required,
// additionalProperties, items, enum, anyOf, $ref, $defs, description) is
// what every strict implementation takes.
var nonCore = []string{"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
	"patternProperties", "default", "examples"}

// emptyParams stands for a tool without parameters.
var emptyParams = json.RawMessage(`{"type":"object","properties":{}}`)

// toolSchema returns t's parameters and strictness at schema level.
func toolSchema(t agent.Tool, level int) (json.RawMessage, bool) {
	params := t.Parameters
	if len(params) == 0 {
		params = emptyParams
	}
	return atLevel(params, t.Strict, level)
}

// formatSchema returns the json_schema format's schema and strictness at
// schema level.
func formatSchema(f *agent.ResponseFormat, level int) (json.RawMessage, bool) {
	return atLevel(f.Schema, f.Strict, level)
}

func formatName(f *agent.ResponseFormat) string {
	if f == nil || f.Name == "" {
		return "response"
	}
	return f.Name
}

func atLevel(schema json.RawMessage, strict bool, level int) (json.RawMessage, bool) {
	if !strict || level == schemaStrict {
		return schema, strict
	}
	if level == schemaLoose {
		return schema, false
	}
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return schema, strict
	}
	b, err := json.Marshal(stripNonCore(v, false))
	if err != nil {
		return schema, strict
	}
	return b, true
}

// stripNonCore removes the non-core keywords from a schema, wherever
// they are nested; inProps says v is a properties map, whose keys are
// property names, not keywords.
func stripNonCore(v any, inProps bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, sub := range t {
			if !inProps && isNonCore(k) {
				continue
			}
			out[k] = stripNonCore(sub, !inProps && (k == "properties" || k == "$defs" || k == "definitions"))
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, sub := range t {
			out[i] = stripNonCore(sub, false)
		}
		return out
	}
	return v
}

func isNonCore(k string) bool {
	for _, n := range nonCore {
		if k == n {
			return true
		}
	}
	return false
}

// hasStrict reports whether req sends a strict schema.
func hasStrict(req agent.Request) bool {
	for _, t := range req.Tools {
		if t.Strict {
			return true
		}
	}
	return req.Format != nil && req.Format.Strict
}

// schemaRejected reports whether e is a server's refusal of a tool or
// response schema: OpenAI's invalid_function_parameters and
// invalid_json_schema ("Invalid schema for function 'move_tasks': In
// context=('properties', 'moves'), 'maxItems' is not permitted."), or a
// server that does not take strict schemas at all.
func schemaRejected(e *apiError) bool {
	if e.Status != http.StatusBadRequest && e.Status != http.StatusUnprocessableEntity {
		return false
	}
	if e.Code == "invalid_function_parameters" || e.Code == "invalid_json_schema" {
		return true
	}
	text := strings.ToLower(e.Message + " " + e.Param)
	if strings.Contains(text, "invalid schema") {
		return true
	}
	if !strings.Contains(text, "strict") && !strings.Contains(text, "keyword") {
		return false
	}
	for _, w := range []string{"not permitted", "not supported", "unsupported", "not allowed", "is not valid", "unrecognized"} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// routeMissing reports whether a 404 says the server has no such
// endpoint, as opposed to no such model (OpenAI's model_not_found) or
// no such item in the input: code unknown_url ("Unknown request URL:
// POST /v1/responses…"), or no code and no word of a model or an item
// ("Invalid URL (POST /v1/responses)"; Ollama's plain "404 page not
// found"; vLLM's and LiteLLM's {"detail":"Not Found"}).
func routeMissing(e *apiError) bool {
	if e.Status != http.StatusNotFound {
		return false
	}
	if e.Code == "unknown_url" {
		return true
	}
	if e.Code != "" || e.Param != "" {
		return false
	}
	m := strings.ToLower(e.Message)
	return !strings.Contains(m, "model") && !strings.Contains(m, "item")
}

// wantsResponses reports whether e is a server's refusal of a Chat
// Completions request that names the Responses API as the way ("Function
// tools with reasoning_effort are not supported for … in
// /v1/chat/completions. Please use /v1/responses instead."), as for a
// GPT-6 deployment under a name go-openai does not know.
func wantsResponses(e *apiError) bool {
	m := strings.ToLower(e.Message)
	return e.Status == http.StatusBadRequest && (strings.Contains(m, "use /v1/responses") || strings.Contains(m, "use the responses api"))
}

// unsupportedParam returns the top-level request field that e says the
// server does not support ("Unsupported parameter: 'parallel_tool_calls'
// is not supported with this model.", code unsupported_parameter), or "".
// A sampling field with an unsupported value ("'temperature' does not
// support 0 with this model. Only the default (1) value is supported.",
// code unsupported_value) counts too: leaving it out asks for the default.
func unsupportedParam(e *apiError) string {
	if e.Status != http.StatusBadRequest || e.Param == "" {
		return ""
	}
	field := e.Param
	if i := strings.IndexAny(field, ".["); i >= 0 {
		field = field[:i]
	}
	switch e.Code {
	case "unsupported_parameter":
		return field
	case "unsupported_value":
		if field == "temperature" || field == "top_p" {
			return field
		}
	}
	return ""
}

// contextOverflow and contextRequest read the 400 of a server whose
// context cannot hold the prompt plus the asked-for reply: vLLM's "This
// model's maximum context length is 8192 tokens. However, you requested
// 25000 tokens (424 in the messages, 24576 in the completion). Please
// reduce the length of the messages or completion." (as quoted in
// vllm-project/vllm#20409 and llamastack/llama-stack#981).
var (
	contextOverflow = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	contextRequest  = regexp.MustCompile(`\((\d+) in the messages`)
)

// contextRoom returns the context length a server reported in e and how
// many tokens it leaves for the reply after the prompt.
func contextRoom(e *apiError) (length, room int, ok bool) {
	if e.Status != http.StatusBadRequest {
		return 0, 0, false
	}
	m, r := contextOverflow.FindStringSubmatch(e.Message), contextRequest.FindStringSubmatch(e.Message)
	if m == nil || r == nil {
		return 0, 0, false
	}
	length, err1 := strconv.Atoi(m[1])
	prompt, err2 := strconv.Atoi(r[1])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return length, length - prompt, true
}
