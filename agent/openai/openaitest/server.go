// Package openaitest is a fake OpenAI API on net/http/httptest with a
// scripted model, for tests, demos and benchmarks that run the real client
// (agent/openai, on go-openai) end to end without a network, an account or
// a model.
//
// A Server answers POST {URL}/chat/completions and POST {URL}/responses
// (the Responses API, unless WithoutResponses), where URL ends in /v1 (the
// value to pass as OPENAI_BASE_URL), and the same paths without /v1; and
// GET {URL}/models/{id} (WithModels), and POST {URL}/audio/transcriptions
// (WithTranscripts: see audio.go). Every completion request is decoded
// (a Responses request's input items onto the same Request: see Request),
// checked the way the real API checks it, recorded (Requests, Calls) and,
// if it passes, answered with the script's Reply for it, on the Responses
// API with reasoning, message (with its phase) and function_call output
// items, each with an id; where a later request does not send them back
// as they came, Request.Replay says how:
//
//	srv := openaitest.New(openaitest.Replies(
//		openaitest.Call("get_overview", `{}`),
//		openaitest.RateLimited("2"),
//		openaitest.Call("final_answer", `{"answer":"Done."}`),
//	))
//	defer srv.Close()
//
// A Script is a function of the Request; Replies plays a fixed list and
// FromAgent adapts a func(agent.Request) agent.Response (a scripted
// "competent model"). A Reply is assistant content (any text, malformed
// JSON included), tool calls, or an HTTP error in OpenAI's shape
// {"error":{"message","type","param","code"}}, with optional usage and
// delay.
//
// Like the real API, the fake answers 400, without consulting the script,
// when:
//   - a tool or a json_schema response format is strict and its schema
//     breaks OpenAI's strict rules: every object (in properties, items,
//     anyOf, allOf, oneOf, $defs…) must have additionalProperties: false
//     and list every property in required, and the root must be an object;
//   - a tool message does not answer a tool call of the assistant message
//     before it, or an assistant message's tool calls are not all answered
//     by the tool messages right after it;
//   - tool_choice or parallel_tool_calls is sent without tools, or
//     tool_choice names a function that is not among them;
//   - response_format is json_object and no message contains the word
//     "json";
//   - a tool or response format name is not [a-zA-Z0-9_-]{1,64}, or
//     temperature is outside [0, 2], or max_tokens is below 1;
//   - the Authorization header is not "Bearer <key>" (WithAPIKey only; the
//     401's message then echoes the header verbatim, so that a test can
//     check the client never repeats it);
//   - the response format is one WithoutResponseFormats turned off;
//   - the model's own rules (rules.go): reasoning settings on a model that
//     does not reason, temperature or top_p while a model reasons, tools
//     on Chat Completions for GPT-6 unless reasoning effort is "none",
//     max_tokens for reasoning models, parallel_tool_calls for o1, o3 and
//     o4-mini, the keyword limits of WithStrictCoreOnly and
//     WithoutStrict, and the context of WithContextLength;
//   - on the Responses API (responses.go): reasoning items without the
//     encrypted content this server issued, function calls and outputs
//     that do not pair up, previous_response_id (nothing is stored),
//     max_output_tokens below 16, and strict function tools (strict by
//     default there) with a schema that breaks the strict rules.
//
// A reply longer than the request's token limit (reasoning included) is
// cut off there, with finish_reason "length" or an "incomplete" response
// (incomplete_details.reason "max_output_tokens"). Reasoning models spend
// reasoning tokens by effort (low: 64), and a conversation prefix sent
// before is reported as cached tokens, as OpenAI's prompt cache does.
//
// When a Reply sets no usage, the fake reports a deterministic estimate
// (EstimateUsage: a quarter of the characters sent and received) unless
// WithoutUsage or Reply.NoUsage asks for none, as some local servers do.
//
// A request with "stream": true is answered as server-sent events, on
// both APIs, at the rate WithTokenRate sets, and can be broken midway
// (Reply.FailAfter): see stream.go.
//
// A Server is safe for concurrent use; the script is called with one
// request at a time, so it need not be.
package openaitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/internal/directhttp"
)

// Server is a fake OpenAI chat-completions API.
type Server struct {
	// URL is the base URL, ending in /v1: the OPENAI_BASE_URL of the
	// client under test.
	URL string

	srv    *httptest.Server
	script Script

	// scriptMu serializes calls of script.
	scriptMu sync.Mutex

	// secret signs the encrypted content of reasoning items.
	secret []byte

	mu sync.Mutex // protects the fields below
	// key, if not empty, is the API key the server requires.
	key       string
	latency   time.Duration
	noUsage   bool
	formats   map[string]bool // response_format types turned off
	requests  []Request
	usage     Usage
	responses int
	// noResponses answers 404 for /responses, like servers without it.
	noResponses bool
	// notFound is how a path the server does not serve is answered.
	notFound NotFound
	// models, when not nil, are the only models GET /models/{id} knows.
	models map[string]Model
	// reasoning are model names to treat as reasoning models besides
	// OpenAI's (an Azure deployment of o3 under a name of its own).
	reasoning map[string]bool
	// strict limits strict schemas: strictAll, strictCore or strictNone.
	strict int
	// context, when not 0, is the context length of WithContextLength.
	context int
	// prefixes are hashes of every conversation prefix sent so far, for
	// prompt-cache hits.
	prefixes map[[32]byte]bool
	lookups  int
	// misses counts requests to paths the server does not serve.
	misses int
	// noVision rejects image input (WithoutVision).
	noVision bool
	// transcribe answers /audio/transcriptions (nil: 404).
	transcribe     func(Transcription) string
	transcriptions []Transcription
	// audioLength is how long an upload plays (WithAudioLength).
	audioLength func(Transcription) time.Duration
	// jsonOnly refuses verbose_json (WithJSONOnly).
	jsonOnly bool
	// issued are the Responses output items sent, by item id, and
	// issuedCalls the item ids of the function calls by call_id.
	issued      map[string]issuedItem
	issuedCalls map[string]string
	// tokenRate is the streaming rate in tokens a second (0: at once).
	tokenRate float64
}

// The endpoints a request can come to (Request.API).
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server require "Authorization: Bearer key"; any
// other request gets a 401 like OpenAI's (invalid_api_key). By default the
// server accepts any key or none, like a local server.
func WithAPIKey(key string) Option { return func(s *Server) { s.key = key } }

// WithLatency delays every answer by d (a benchmark uses 1 s to feel like
// a real model). The wait ends early if the client gives up.
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency = d } }

// WithoutUsage makes the server report no usage unless a Reply sets it,
// like servers that send none.
func WithoutUsage() Option { return func(s *Server) { s.noUsage = true } }

// WithoutResponseFormats makes the server reject response_format of the
// given types ("json_schema", "json_object") with a 400 "response_format
// json_schema is not supported", like local servers without structured
// outputs.
func WithoutResponseFormats(types ...string) Option {
	return func(s *Server) {
		for _, t := range types {
			s.formats[t] = true
		}
	}
}

// New starts a server that answers with script. A nil script answers
// every call with Text("OK"). Close the server when done.
func New(script Script, opts ...Option) *Server {
	if script == nil {
		script = func(Request) Reply { return Text("OK") }
	}
	s := &Server{script: script, formats: map[string]bool{}, reasoning: map[string]bool{}, prefixes: map[[32]byte]bool{}, secret: make([]byte, 32),
		issued: map[string]issuedItem{}, issuedCalls: map[string]string{}}
	_, _ = rand.Read(s.secret)
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Client returns an *http.Client for the server, with a timeout.
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	c.Timeout = 30 * time.Second
	return &c
}

// Handler returns the fake as an http.Handler, for tests that must not
// use a socket.
func (s *Server) Handler() http.Handler { return s }

// DirectClient returns an *http.Client whose transport calls the handler
// in the calling goroutine, with no socket: inside a testing/synctest
// bubble, where real network I/O is not allowed, the client then runs on
// the bubble's fake clock (injected latency included).
func (s *Server) DirectClient() *http.Client {
	return directhttp.Client(s)
}

// SetLatency changes the delay of every answer (see WithLatency).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls returns how many chat-completion requests arrived, rejected and
// failed ones included.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Responses returns how many requests were answered with a completion
// (HTTP 200).
func (s *Server) Responses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responses
}

// Requests returns every chat-completion request so far, in order of
// arrival, rejected and failed ones included.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// LastRequest returns the latest request; ok is false if none arrived.
func (s *Server) LastRequest() (r Request, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}, false
	}
	return s.requests[len(s.requests)-1], true
}

// Usage returns the sum of the usage reported in every completion.
func (s *Server) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// ResetCounters forgets the recorded requests, responses and usage.
func (s *Server) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.responses = 0
	s.usage = Usage{}
	s.lookups = 0
}

// maxBody caps the size of a request body.
const maxBody = 32 << 20

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	s.mu.Lock()
	noResponses := s.noResponses
	s.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/models/"):
		s.serveModel(w, r, strings.TrimPrefix(path, "/models/"))
		return
	case r.Method == http.MethodPost && path == "/chat/completions":
		s.serveCompletion(w, r, APIChat)
		return
	case r.Method == http.MethodPost && path == "/responses" && !noResponses:
		s.serveCompletion(w, r, APIResponses)
		return
	case r.Method == http.MethodPost && path == "/audio/transcriptions":
		s.serveTranscription(w, r)
		return
	}
	s.mu.Lock()
	s.misses++
	kind := s.notFound
	s.mu.Unlock()
	switch kind {
	case NotFoundUnknownURL:
		writeError(w, http.StatusNotFound, &APIError{
			Message: fmt.Sprintf("Unknown request URL: %s %s. Please check the URL for typos, or see the docs at https://platform.openai.com/docs/api-reference/.", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
			Code:    "unknown_url",
		})
	case NotFoundPlain:
		http.NotFound(w, r)
	case NotFoundDetail:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
	default:
		writeError(w, http.StatusNotFound, &APIError{
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
		})
	}
}

// serveCompletion answers a chat completion or a response.
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, api string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, &invalid("", "", "could not read the request body: "+err.Error()).APIError)
		return
	}

	var (
		req  Request
		perr *statusError
	)
	if api == APIResponses {
		req, perr = s.decodeResponses(body)
	} else {
		req, perr = decodeRequest(body)
	}
	req.API = api
	req.Header = r.Header.Clone()
	req.Body = body

	s.mu.Lock()
	req.Call = len(s.requests) + 1
	s.requests = append(s.requests, req)
	latency, key, noUsage := s.latency, s.key, s.noUsage
	off := s.formats[formatType(req.ResponseFormat)]
	s.mu.Unlock()

	if aerr := s.check(r, req, perr, key, off); aerr != nil {
		if !sleep(r.Context(), latency) {
			return
		}
		if aerr.raw != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(aerr.status)
			_, _ = io.WriteString(w, aerr.raw)
			return
		}
		writeError(w, aerr.status, &aerr.APIError)
		return
	}

	s.scriptMu.Lock()
	reply := s.script(req)
	s.scriptMu.Unlock()

	if !sleep(r.Context(), latency+reply.Delay) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		s.writeReplyError(w, reply)
		return
	}
	reply, u, cut, sendUsage := s.outcome(req, withOutput(req, reply), noUsage)
	if req.Stream {
		s.writeStream(w, r, req, reply, u, cut, sendUsage)
		return
	}
	if api == APIResponses {
		s.writeResponse(w, req, reply, u, cut, sendUsage)
		return
	}
	s.writeCompletion(w, req, reply, u, cut, sendUsage)
}

// check applies the real API's checks that a script should not have to
// care about; nil means the request may go to the script.
func (s *Server) check(r *http.Request, req Request, perr *statusError, key string, formatOff bool) *statusError {
	if key != "" {
		got := r.Header.Get("Authorization")
		if got == "" {
			return &statusError{status: http.StatusUnauthorized, APIError: APIError{
				Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
				Type:    "invalid_request_error",
			}}
		}
		if got != "Bearer "+key {
			return &statusError{status: http.StatusUnauthorized, APIError: APIError{
				Message: "Incorrect API key provided: " + got + ". You can find your API key at https://platform.openai.com/account/api-keys.",
				Type:    "invalid_request_error",
				Code:    "invalid_api_key",
			}}
		}
	}
	if perr != nil {
		return perr
	}
	if err := s.visionRule(req); err != nil {
		return err
	}
	if err := s.modelRules(req); err != nil {
		return err
	}
	if err := s.strictRules(req); err != nil {
		return err
	}
	if err := s.contextRule(req); err != nil {
		return err
	}
	if formatOff {
		t := formatType(req.ResponseFormat)
		return &statusError{status: http.StatusBadRequest, APIError: APIError{
			Message: "response_format " + t + " is not supported",
			Type:    "invalid_request_error",
			Param:   "response_format",
		}}
	}
	return nil
}

func formatType(f *ResponseFormat) string {
	if f == nil {
		return ""
	}
	return f.Type
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Server) writeReplyError(w http.ResponseWriter, reply Reply) {
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	if reply.Body != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	e := reply.Error
	if e == nil {
		d := defaultError(reply.Status)
		e = &d
	}
	writeError(w, reply.Status, e)
}

// defaultError is the error body OpenAI sends with status.
func defaultError(status int) APIError {
	switch {
	case status == http.StatusUnauthorized:
		return APIError{Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"}
	case status == http.StatusTooManyRequests:
		return APIError{Message: "Rate limit reached for requests. Please try again in a few seconds.", Type: "requests", Code: "rate_limit_exceeded"}
	case status >= 500:
		return APIError{Message: "The server had an error while processing your request. Sorry about that!", Type: "server_error"}
	}
	return APIError{Message: http.StatusText(status), Type: "invalid_request_error"}
}

// completion is the body of a successful answer.
type completion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *usageJSON `json:"usage,omitempty"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	LogProbs     *struct{}       `json:"logprobs"`
}

type responseMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (s *Server) writeCompletion(w http.ResponseWriter, req Request, reply Reply, u Usage, cut, sendUsage bool) {
	msg := responseMessage{Role: "assistant"}
	if reply.Content != "" || len(reply.ToolCalls) == 0 {
		msg.Content = &reply.Content
	}
	for _, c := range reply.ToolCalls {
		wc := wireToolCall{ID: c.ID, Type: "function"}
		wc.Function.Name = c.Name
		wc.Function.Arguments = c.Arguments
		msg.ToolCalls = append(msg.ToolCalls, wc)
	}
	finish := chatFinish(reply, cut)
	out := completion{
		ID:      fmt.Sprintf("chatcmpl-openaitest-%d", req.Call),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   req.Model,
		Choices: []choice{{Message: msg, FinishReason: finish}},
	}
	if sendUsage {
		out.Usage = chatUsage(u)
	}
	s.writeJSON(w, out, u)
}

// chatFinish is the finish_reason of a Chat Completions reply: the
// script's, else "tool_calls" or "stop", and "length" when it is cut.
func chatFinish(reply Reply, cut bool) string {
	if cut {
		return "length"
	}
	if reply.FinishReason != "" {
		return reply.FinishReason
	}
	if len(reply.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// chatUsage is u as the Chat Completions usage object.
func chatUsage(u Usage) *usageJSON {
	wu := &usageJSON{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	wu.PromptTokensDetails.CachedTokens = u.CachedTokens
	wu.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return wu
}

// count records one successful answer and its usage.
func (s *Server) count(u Usage) {
	s.mu.Lock()
	s.responses++
	s.usage.PromptTokens += u.PromptTokens
	s.usage.CompletionTokens += u.CompletionTokens
	s.usage.ReasoningTokens += u.ReasoningTokens
	s.usage.CachedTokens += u.CachedTokens
	s.mu.Unlock()
}

// writeJSON sends a successful answer and counts it with its usage.
func (s *Server) writeJSON(w http.ResponseWriter, out any, u Usage) {
	b, err := json.Marshal(out)
	if err != nil {
		writeError(w, http.StatusInternalServerError, &APIError{Message: "openaitest: " + err.Error(), Type: "server_error"})
		return
	}
	s.count(u)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// outcome settles what a reply reports: its usage (the script's, or
// EstimateUsage plus the reasoning the request's effort costs and the
// prompt-cache hits), and whether it is cut off at the request's token
// limit, as the real API cuts a reply that reaches max_tokens /
// max_output_tokens (reasoning counts against the limit) and says so with
// finish_reason "length" or status "incomplete".
func (s *Server) outcome(req Request, reply Reply, noUsage bool) (Reply, Usage, bool, bool) {
	sendUsage := reply.Usage != nil || (!reply.NoUsage && !noUsage)
	cached := s.cache(req)
	cut := reply.FinishReason == "length"
	if reply.Usage != nil {
		return reply, *reply.Usage, cut, true
	}
	u := EstimateUsage(req, reply)
	u.ReasoningTokens = s.reasoningTokens(req)
	u.CompletionTokens += u.ReasoningTokens
	u.CachedTokens = cached
	if limit := req.MaxTokens; limit > 0 && u.CompletionTokens > limit {
		reply = cutReply(reply, max(limit-u.ReasoningTokens, 0)*4)
		u.ReasoningTokens = min(u.ReasoningTokens, limit)
		u.CompletionTokens = limit
		cut = true
	}
	if !sendUsage {
		u = Usage{}
	}
	return reply, u, cut, sendUsage
}

// cutReply keeps the first n characters of the reply's content and tool
// call arguments, as a model cut off mid-answer leaves them.
func cutReply(r Reply, n int) Reply {
	take := func(s string) string {
		k := min(len(s), max(n, 0))
		n -= k
		return s[:k]
	}
	r.Content = take(r.Content)
	calls := r.ToolCalls
	r.ToolCalls = nil
	for _, c := range calls {
		if n <= 0 {
			break
		}
		c.Arguments = take(c.Arguments)
		r.ToolCalls = append(r.ToolCalls, c)
	}
	return r
}

// EstimateUsage is the fake's deterministic usage: a quarter of the
// characters of every message, tool call, tool definition and response
// schema sent (prompt), and of the reply's content and tool calls
// (completion), rounded up.
func EstimateUsage(req Request, reply Reply) Usage {
	var p, c int
	for _, m := range req.Messages {
		p += len(m.Role) + len(m.Content) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			p += len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		p += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if req.ResponseFormat != nil {
		p += len(req.ResponseFormat.Schema)
	}
	c = len(reply.Content)
	for _, tc := range reply.ToolCalls {
		c += len(tc.Name) + len(tc.Arguments)
	}
	return Usage{PromptTokens: (p + 3) / 4, CompletionTokens: (c + 3) / 4}
}

// statusError is an error answer: a status and OpenAI's error body.
type statusError struct {
	status int
	APIError
	// raw, when set, is the body instead of OpenAI's error shape.
	raw string
}

func invalid(param, code, msg string) *statusError {
	return &statusError{status: http.StatusBadRequest, APIError: APIError{Message: msg, Type: "invalid_request_error", Param: param, Code: code}}
}

func writeError(w http.ResponseWriter, status int, e *APIError) {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// lowerContains reports whether any message mentions word, ignoring case.
func lowerContains(msgs []Message, word string) bool {
	for _, m := range msgs {
		if strings.Contains(strings.ToLower(m.Content), word) {
			return true
		}
	}
	return false
}
