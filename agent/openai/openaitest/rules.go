package openaitest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// Model is a model GET /models/{id} knows.
type Model struct {
	ID string
	// ShutdownDate is "YYYY-MM-DD", or "" for none announced.
	ShutdownDate string
}

// WithoutResponses makes the server answer 404 to the Responses API,
// like OpenAI-compatible servers that have only Chat Completions, in the
// words of WithNotFound.
func WithoutResponses() Option { return func(s *Server) { s.noResponses = true } }

// NotFound is how a server answers a path it does not serve.
type NotFound int

// The answers of NotFound.
const (
	// NotFoundInvalidURL is OpenAI's error shape with code null:
	// {"error":{"message":"Invalid URL (POST /v1/responses)",
	// "type":"invalid_request_error","param":null,"code":null}}, as
	// quoted from OpenAI-compatible gateways in QuantumNous/new-api#1396.
	NotFoundInvalidURL NotFound = iota
	// NotFoundUnknownURL has code unknown_url: {"error":{"message":
	// "Unknown request URL: POST /v1/responses. Please check the URL for
	// typos, or see the docs at …","type":"invalid_request_error",
	// "param":null,"code":"unknown_url"}}, OpenAI's answer as issue 22
	// quotes it, and Groq's (quoted with console.groq.com/docs in
	// client tests that classify it).
	NotFoundUnknownURL
	// NotFoundPlain is the text/plain "404 page not found" of Go's
	// net/http and of gin (default404Body), which Ollama serves.
	NotFoundPlain
	// NotFoundDetail is FastAPI's default {"detail":"Not Found"}
	// (fastapi.tiangolo.com/tutorial/handling-errors), which vLLM and
	// LiteLLM serve.
	NotFoundDetail
)

// WithNotFound sets how the server answers a path it does not serve
// (NotFoundInvalidURL by default).
func WithNotFound(kind NotFound) Option { return func(s *Server) { s.notFound = kind } }

// Deprecations are the shutdown dates OpenAI's deprecations page
// (https://developers.openai.com/api/docs/deprecations) announces for
// the models the bot might be configured with, which GET /models/{id}
// reports as shutdown_date (the page: "call the List models endpoint …
// and check each model's optional shutdown_date field"):
//   - "2026-06-11: GPT-5 and o3 model deprecations": gpt-5, gpt-5-mini,
//     gpt-5-nano, gpt-5-pro, o3 and o3-pro and their snapshots, shut down
//     on 2026-12-11;
//   - "2026-10-14: GPT-4 family": GPT-4o (gpt-4o-2024-08-06,
//     gpt-4o-2024-11-20), GPT-4o mini (gpt-4o-mini-2024-07-18), GPT-4.1
//     (gpt-4.1-2025-04-14) and GPT-4.1 mini (gpt-4.1-mini-2025-04-14),
//     shut down on 2027-01-14;
//   - gpt-5.1, gpt-5.3-codex and gpt-5.4-nano, shut down on 2027-04-01:
//     the page's row could not be read; the date is the one third-party
//     copies of the page and of GET /v1/models agree on
//     (dev.to/max_bob "OpenAI API deprecations 2026–2027", checked
//     against GET /v1/models on 2026-10-27; dev.to/aidriftline
//     "OpenAI retires gpt-5.3-codex, gpt-5.1 and gpt-5.4-nano on 1
//     April 2027").
var Deprecations = map[string]string{
	"gpt-5.1": "2027-04-01", "gpt-5.3-codex": "2027-04-01", "gpt-5.4-nano": "2027-04-01",
	"gpt-5": "2026-12-11", "gpt-5-2025-08-07": "2026-12-11", "gpt-5-mini": "2026-12-11", "gpt-5-mini-2025-08-07": "2026-12-11",
	"gpt-5-nano": "2026-12-11", "gpt-5-nano-2025-08-07": "2026-12-11", "gpt-5-pro": "2026-12-11", "gpt-5-pro-2025-10-06": "2026-12-11",
	"o3": "2026-12-11", "o3-2025-04-16": "2026-12-11", "o3-pro": "2026-12-11", "o3-pro-2025-06-10": "2026-12-11",
	"gpt-4o": "2027-01-14", "gpt-4o-2024-08-06": "2027-01-14", "gpt-4o-2024-11-20": "2027-01-14", "gpt-4o-mini": "2027-01-14",
	"gpt-4o-mini-2024-07-18": "2027-01-14", "gpt-4.1": "2027-01-14", "gpt-4.1-2025-04-14": "2027-01-14", "gpt-4.1-mini": "2027-01-14",
	"gpt-4.1-mini-2025-04-14": "2027-01-14",
}

// WithModels makes GET /models/{id} know only these models; by default
// it knows every model it is asked about, with the shutdown date
// Deprecations gives it, if any.
func WithModels(models ...Model) Option {
	return func(s *Server) {
		s.models = map[string]Model{}
		for _, m := range models {
			s.models[m.ID] = m
		}
	}
}

// WithReasoningModels makes the server treat these model names as
// reasoning models, like an Azure deployment of o3 or GPT-6 under a name
// of its own: OpenAI's reasoning models are known by name already.
func WithReasoningModels(names ...string) Option {
	return func(s *Server) {
		for _, n := range names {
			s.reasoning[n] = true
		}
	}
}

// Strict-schema limits (WithStrictCoreOnly, WithoutStrict).
const (
	strictAll = iota
	strictCore
	strictNone
)

// WithStrictCoreOnly makes the server reject, in strict schemas, the
// keywords OpenAI's structured outputs do not support for fine-tuned
// models ("Some type-specific keywords are not yet supported … Not
// supported for fine-tuned models: minLength, maxLength, pattern, format;
// minimum, maximum, multipleOf; patternProperties; minItems, maxItems":
// https://platform.openai.com/docs/guides/structured-outputs#supported-schemas),
// as many OpenAI-compatible servers do too.
func WithStrictCoreOnly() Option { return func(s *Server) { s.strict = strictCore } }

// WithoutStrict makes the server reject every strict schema, like
// compatible servers whose grammar engine cannot enforce one.
func WithoutStrict() Option { return func(s *Server) { s.strict = strictNone } }

// ModelLookups returns how many GET /models/{id} requests arrived.
func (s *Server) ModelLookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// Misses returns how many requests came to a path the server does not
// serve (answered 404 "Invalid URL"), such as /responses under
// WithoutResponses.
func (s *Server) Misses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.misses
}

// serveModel answers GET /models/{id} with OpenAI's model object, which
// carries an optional shutdown_date ("YYYY-MM-DD" or null: OpenAI's
// deprecations page, https://developers.openai.com/api/docs/deprecations,
// "call the List models endpoint … and check each model's optional
// shutdown_date field … also available from the Retrieve a model
// endpoint"). An unknown model is a 404 model_not_found.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	s.lookups++
	key, models := s.key, s.models
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, &APIError{Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"})
		return
	}
	m, ok := Model{ID: id, ShutdownDate: Deprecations[id]}, true
	if models != nil {
		m, ok = models[id]
	}
	if !ok {
		writeError(w, http.StatusNotFound, &APIError{Message: fmt.Sprintf("The model '%s' does not exist", id),
			Type: "invalid_request_error", Param: "model", Code: "model_not_found"})
		return
	}
	var shutdown *string
	if m.ShutdownDate != "" {
		shutdown = &m.ShutdownDate
	}
	b, _ := json.Marshal(struct {
		ID           string  `json:"id"`
		Object       string  `json:"object"`
		Created      int64   `json:"created"`
		OwnedBy      string  `json:"owned_by"`
		ShutdownDate *string `json:"shutdown_date"`
	}{id, "model", time.Date(2026, 9, 22, 0, 0, 0, 0, time.UTC).Unix(), "system", shutdown})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// isReasoning reports whether model reasons: OpenAI's o-series, GPT-5
// and GPT-6 (go-openai's reasoning_validator.go checks the same
// prefixes), or a name given to WithReasoningModels.
func (s *Server) isReasoning(model string) bool {
	s.mu.Lock()
	named := s.reasoning[model]
	s.mu.Unlock()
	if named {
		return true
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// gpt6 reports whether model is a published GPT-6 id, and whether it
// accepts reasoning effort "none" (go-openai's reasoning_validator.go:
// gpt-6-luna and gpt-6-sol do; gpt-6-astra and gpt-6.1-sol do not).
func gpt6(model string) (is, none bool) {
	switch model {
	case "gpt-6-luna", "gpt-6-sol":
		return true, true
	case "gpt-6-astra", "gpt-6.1-sol":
		return true, false
	}
	return false, false
}

// effort returns the effort the model reasons at: the one sent, else
// "medium", OpenAI's default for reasoning models; "" for a model that
// does not reason.
func (s *Server) effort(req Request) string {
	if !s.isReasoning(req.Model) {
		return ""
	}
	if req.ReasoningEffort == "" {
		return "medium"
	}
	return req.ReasoningEffort
}

func unsupported(param, what string) *statusError {
	return invalid(param, "unsupported_parameter", fmt.Sprintf("Unsupported parameter: '%s' is not supported with this model.%s", param, what))
}

// modelRules applies the rules that depend on the model; each answers
// with the API's own error body. unsupported_parameter errors have the
// shape {"message": "Unsupported parameter: 'temperature' is not
// supported with this model.", "type": "invalid_request_error", "param":
// "temperature", "code": "unsupported_parameter"} (as quoted in
// soberlemur/autopo#57 and openai/openai-python issues).
func (s *Server) modelRules(req Request) *statusError {
	reasoning := s.isReasoning(req.Model)
	effortParam := "reasoning_effort"
	if req.API == APIResponses {
		effortParam = "reasoning.effort"
	}
	// Reasoning settings on a model that does not reason: 400
	// unsupported_parameter "Unsupported parameter: 'reasoning.effort' is
	// not supported with this model." (quoted for gpt-4.1 in
	// BoundaryML/baml#2708 and for gpt-4o in
	// RageAgainstThePixel/OpenAI-DotNet#500). The include rule below has
	// no public source found; its wording is ours.
	if !reasoning && req.ReasoningEffort != "" {
		return unsupported(effortParam, "")
	}
	if !reasoning && slices.Contains(req.Include, "reasoning.encrypted_content") {
		return invalid("include", "", "Encrypted content is not supported with this model.")
	}
	if !reasoning {
		return nil
	}
	effort := s.effort(req)
	if is, none := gpt6(req.Model); is {
		// go-openai's reasoning_validator.go, validateGPT6ChatParams:
		// low, medium, high, xhigh, max; none for luna and sol only.
		switch effort {
		case "low", "medium", "high", "xhigh", "max":
		case "none":
			if !none {
				return invalid(effortParam, "unsupported_value", fmt.Sprintf("Unsupported value: '%s' does not support 'none' with this model. Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'.", effortParam))
			}
		default:
			return invalid(effortParam, "unsupported_value", fmt.Sprintf("Unsupported value: '%s' does not support '%s' with this model.", effortParam, effort))
		}
		// Tools on Chat Completions only without reasoning: "Chat
		// Completions supports function calling only with reasoning effort
		// set to none" (https://docs.oxen.ai/inference-api/reference/models/gpt-6-luna,
		// after OpenAI's model page; go-openai refuses the same with
		// ErrReasoningToolsRequireResponses). The sources give the rule,
		// not the wording of the 400, which is ours.
		if req.API == APIChat && effort != "none" && len(req.Tools) > 0 {
			return invalid("tools", "", fmt.Sprintf("Function tools with reasoning_effort are not supported for %s in /v1/chat/completions. Please use /v1/responses instead.", req.Model))
		}
	}
	// Sampling parameters only without reasoning (go-openai:
	// ErrReasoningSamplingUnsupported, "temperature, top_p and log
	// probabilities must be omitted when reasoning is enabled").
	if effort != "none" && req.Temperature != nil {
		return unsupported("temperature", "")
	}
	if effort != "none" && req.TopP != nil {
		return unsupported("top_p", "")
	}
	// Reasoning models take max_completion_tokens on Chat Completions
	// (go-openai's reasoning_validator.go,
	// ErrReasoningModelMaxTokensDeprecated).
	if req.MaxTokensField == "max_tokens" {
		return unsupported("max_tokens", " Use 'max_completion_tokens' instead.")
	}
	// o1, o3, o3-mini and o4-mini reject parallel_tool_calls, even false
	// (the 400 quoted in evalstate/fast-agent#279 for o4-mini,
	// langchain-ai/langchain#29704 and bosun-ai/kwaak#391 for o3-mini;
	// langchain-ai/langgraph-supervisor-py#125 lists o3).
	for _, p := range []string{"o1", "o3", "o4-mini"} {
		if strings.HasPrefix(req.Model, p) && req.ParallelToolCalls != nil {
			return unsupported("parallel_tool_calls", "")
		}
	}
	return nil
}

// nonCoreKeywords are what WithStrictCoreOnly rejects.
var nonCoreKeywords = []string{"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "multipleOf",
	"patternProperties", "minItems", "maxItems"}

// strictRules applies WithStrictCoreOnly and WithoutStrict.
func (s *Server) strictRules(req Request) *statusError {
	s.mu.Lock()
	limit := s.strict
	s.mu.Unlock()
	if limit == strictAll {
		return nil
	}
	check := func(param, code, what string, schema json.RawMessage) *statusError {
		if limit == strictNone {
			return invalid(param, "", fmt.Sprintf("Invalid request: 'strict' mode is not supported for %s.", what))
		}
		var v any
		_ = json.Unmarshal(schema, &v)
		if kw, path := findKeyword(v, nil, false); kw != "" {
			return invalid(param, code, fmt.Sprintf("Invalid schema for %s: In context=%s, '%s' is not permitted.", what, pyTuple(path), kw))
		}
		return nil
	}
	for i, t := range req.Tools {
		if t.Strict {
			if err := check(fmt.Sprintf("tools[%d]", i), "invalid_function_parameters", fmt.Sprintf("function '%s'", t.Name), t.Parameters); err != nil {
				return err
			}
		}
	}
	if f := req.ResponseFormat; f != nil && f.Type == "json_schema" && f.Strict {
		return check("response_format", "invalid_json_schema", fmt.Sprintf("response_format '%s'", f.Name), f.Schema)
	}
	return nil
}

// findKeyword returns the first non-core keyword in a schema and where.
func findKeyword(v any, path []string, inProps bool) (string, []string) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !inProps && slices.Contains(nonCoreKeywords, k) {
				return k, path
			}
		}
		for _, k := range keys {
			if kw, p := findKeyword(t[k], append(slices.Clip(path), k), !inProps && (k == "properties" || k == "$defs")); kw != "" {
				return kw, p
			}
		}
	case []any:
		for i, sub := range t {
			if kw, p := findKeyword(sub, append(slices.Clip(path), fmt.Sprint(i)), false); kw != "" {
				return kw, p
			}
		}
	}
	return "", nil
}

// reasoningTokens is what the request's effort costs, deterministically.
func (s *Server) reasoningTokens(req Request) int {
	return map[string]int{"minimal": 16, "low": 64, "medium": 256, "high": 1024, "xhigh": 2048, "max": 4096}[s.effort(req)]
}

// cache returns the prompt tokens of req served from the prompt cache and
// remembers req's prefixes. As OpenAI's prompt caching guide says, a
// prompt of 1024 tokens or more is cached, and hits count in increments
// of 128 tokens (https://platform.openai.com/docs/guides/prompt-caching);
// here a hit is the longest run of leading messages some earlier request
// also began with, measured like EstimateUsage. The tool list comes
// before the messages: the guide names "the list of available tools"
// among what is cached, as part of the prefix.
func (s *Server) cache(req Request) int {
	h := sha256.New()
	h.Write([]byte(req.Model))
	chars, hit := 0, 0
	var sums [][32]byte
	for _, t := range req.Tools {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s", t.Name, t.Description, t.Parameters)
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	for _, m := range req.Messages {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s", m.Role, m.Content, m.ToolCallID)
		n := len(m.Role) + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(h, "\x00%s\x00%s\x00%s", c.ID, c.Name, c.Arguments)
			n += len(c.Name) + len(c.Arguments)
		}
		chars += n
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		sums = append(sums, sum)
		s.mu.Lock()
		seen := s.prefixes[sum]
		s.mu.Unlock()
		if seen {
			hit = chars
		}
	}
	s.mu.Lock()
	for _, sum := range sums {
		s.prefixes[sum] = true
	}
	s.mu.Unlock()
	tokens := (hit + 3) / 4
	if tokens < 1024 {
		return 0
	}
	return tokens / 128 * 128
}

// WithContextLength makes the server refuse a request whose prompt plus
// token limit exceeds n tokens (measured like EstimateUsage), as vLLM
// does when max_tokens does not fit its --max-model-len, with vLLM's body
// {"object": "error", "message": "This model's maximum context length is
// 8192 tokens. However, you requested 25000 tokens (424 in the messages,
// 24576 in the completion). Please reduce the length of the messages or
// completion.", "type": "BadRequestError", "param": null, "code": 400}
// (quoted in llamastack/llama-stack#981 and vllm-project/vllm#20409).
func WithContextLength(n int) Option { return func(s *Server) { s.context = n } }

func (s *Server) contextRule(req Request) *statusError {
	s.mu.Lock()
	n := s.context
	s.mu.Unlock()
	if n == 0 || req.MaxTokens == 0 {
		return nil
	}
	prompt := EstimateUsage(req, Reply{}).PromptTokens
	if prompt+req.MaxTokens <= n {
		return nil
	}
	msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		n, prompt+req.MaxTokens, prompt, req.MaxTokens)
	b, _ := json.Marshal(map[string]any{"object": "error", "message": msg, "type": "BadRequestError", "param": nil, "code": 400})
	return &statusError{status: http.StatusBadRequest, APIError: APIError{Message: msg, Type: "BadRequestError"}, raw: string(b)}
}
