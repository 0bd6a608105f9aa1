// Package openai implements agent.Model on github.com/sashabaranov/go-openai
// against OpenAI's Responses API or the Chat Completions API of OpenAI or
// of any OpenAI-compatible server (Azure OpenAI's v1 endpoint, Ollama,
// vLLM, LM Studio, llama.cpp), chosen by the base URL (OPENAI_BASE_URL)
// and OPENAI_API. The engine does not know which transport is in use.
//
// Beyond mapping types, it adapts to each server: what a server is
// known or found to refuse (a transport, a request field, a strict
// schema, a response format, a context length) is learnt from its answer
// and remembered for the client's later calls (see adapt and shrink);
// each such quirk is explained where the code handles it.
//
// Every error Complete returns, other than the context's, wraps an
// *agent.Error whose message is safe to show a user. The API key never
// appears in an error or a log line: messages from the server are
// redacted before they are kept.
package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/retry"
)

// Defaults of Config.
const (
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultModel        = "gpt-6-luna"
	DefaultEffort       = "low"
	DefaultMaxRetryWait = 60 * time.Second
	DefaultBackoffBase  = 500 * time.Millisecond
	DefaultBackoffMax   = 20 * time.Second
)

// APIs, the values of Config.API (OPENAI_API).
const (
	APIAuto      = "auto"
	APIChat      = "chat"
	APIResponses = "responses"
)

// Efforts lists the reasoning efforts Config.ReasoningEffort may name
// (go-openai's reasoning_validator.go constants); which ones a model
// accepts is the model's business.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// Config configures a Client. Zero values take the defaults.
type Config struct {
	// APIKey is sent as a Bearer token (OPENAI_API_KEY); empty sends no
	// Authorization header, for local servers that need none.
	APIKey string
	// BaseURL is the API base URL (OPENAI_BASE_URL), ending in /v1 for
	// most servers: https://api.openai.com/v1 (default),
	// https://<resource>.openai.azure.com/openai/v1,
	// http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM),
	// http://localhost:1234/v1 (LM Studio).
	BaseURL string
	// Model is the model name (OPENAI_MODEL); on Azure, the deployment
	// name. Default DefaultModel.
	Model string
	// API is APIAuto (default), APIChat or APIResponses (OPENAI_API).
	API string
	// ReasoningEffort is sent to reasoning models (TIDYBOT_REASONING_EFFORT,
	// one of Efforts); empty means DefaultEffort for reasoning models and
	// nothing for others.
	ReasoningEffort string
	// ReasoningModel treats the model as a reasoning model whatever its
	// name (OPENAI_REASONING_MODEL): max_completion_tokens, a reasoning
	// effort and no temperature, as an Azure deployment of o3 or GPT-6
	// under a name of its own needs.
	ReasoningModel bool
	// MaxCompletionTokens sends the token limit as max_completion_tokens
	// for every model, not only for reasoning models.
	MaxCompletionTokens bool

	// MaxRetryWait caps the total time one Complete waits between
	// attempts (after 429s, 5xx answers and network errors): once the next
	// wait would pass it, the call fails with the last error. Default
	// DefaultMaxRetryWait; negative turns retries off. A wait honours
	// Retry-After (and OpenAI's retry-after-ms, else its
	// x-ratelimit-reset-requests/-tokens), else backs off (see
	// BackoffBase); a 429 for an exhausted quota is not retried, and
	// other 4xx answers are final.
	MaxRetryWait time.Duration
	// MaxResponseBytes bounds the body of one answer (default
	// DefaultMaxResponseBytes): a longer one is cut off there and the
	// call fails, instead of a runaway server filling the memory and the
	// transcript.
	MaxResponseBytes int64
	// BackoffBase and BackoffMax shape the backoff used when the server
	// gives no Retry-After: the n-th retry waits about BackoffBase·2ⁿ,
	// with jitter, at most BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Sleep waits between attempts; it must return ctx.Err() if ctx ends
	// first. Tests replace it to record waits instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives retries (debug) and what the client learnt about the
	// server (warn). Default: discard.
	Logger *slog.Logger
}

// Schema levels, the strictest first: what the client does with strict
// schemas after servers rejected them.
const (
	schemaStrict     = iota // as the engine made them
	schemaStrictCore        // strict, with only the core keywords
	schemaLoose             // not strict
)

// Client is an agent.Model on an OpenAI-compatible API. It is safe for
// concurrent use.
type Client struct {
	api    *goopenai.Client
	hc     *http.Client
	model  string
	key    string
	host   string
	cfg    Config
	log    *slog.Logger
	effort string // effective reasoning effort; "" sends none

	mu sync.Mutex // protects the fields below: what the server taught us
	// best is the strongest response format the server has not refused.
	best agent.FormatKind
	// transport is APIChat or APIResponses.
	transport string
	// dropped are request fields the server said it does not support.
	dropped map[string]bool
	// maxCompletion sends max_completion_tokens instead of max_tokens:
	// for reasoning models, with Config.MaxCompletionTokens, or once the
	// server asked for it.
	maxCompletion bool
	// schema is the schema level in use.
	schema int
	// context is the server's context length in tokens, once a 400 told
	// it (0: unknown); replies are asked to fit in it.
	context int
	// noResponses is set once the server answered 404 for /responses.
	noResponses bool

	// others are the clients of the other models requests named
	// (Request.Model), one per model, made on first use: each keeps what
	// it decides and learns about its own model (API, reasoning,
	// response formats, dropped fields), so no fallback one model needed
	// leaks to another.
	othersMu sync.Mutex
	others   map[string]*Client

	// toolsMu protects tools, the last tools made (see chatTools) and
	// their encoding (see encodedTools).
	toolsMu sync.Mutex
	tools   struct {
		from  []agent.Tool
		level int
		built []goopenai.Tool
		json  []byte // built encoded, once asked for
	}
}

var _ agent.Model = (*Client)(nil)

// New returns a client. hc should have a timeout that covers a slow model
// (when nil, a client with a 2-minute timeout is used, never
// http.DefaultClient); New does not modify it.
func New(cfg Config, hc *http.Client) *Client {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.API == "" {
		cfg.API = APIAuto
	}
	if cfg.MaxRetryWait == 0 {
		cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	if cfg.Sleep == nil {
		cfg.Sleep = retry.Sleep
	}
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = doer{hc: hc, max: cfg.MaxResponseBytes}
	c := &Client{
		api:     goopenai.NewClientWithConfig(oc),
		hc:      hc,
		model:   cfg.Model,
		key:     cfg.APIKey,
		host:    hostOf(cfg.BaseURL),
		cfg:     cfg,
		log:     log,
		best:    agent.FormatJSONSchema,
		dropped: map[string]bool{},
	}
	c.maxCompletion = cfg.MaxCompletionTokens || c.reasoning()
	c.effort = cfg.ReasoningEffort
	if c.effort == "" && c.reasoning() {
		c.effort = DefaultEffort
	}
	// The Responses API is what OpenAI designs its reasoning models for,
	// and the only one on which GPT-6 models call tools while reasoning
	// (go-openai's reasoning_validator.go refuses tools on Chat
	// Completions for them unless reasoning_effort is "none"). Auto uses
	// it on api.openai.com and for those models, Chat Completions
	// elsewhere; adapt corrects the choice when the server disagrees.
	c.transport = cfg.API
	if c.transport == APIAuto {
		c.transport = APIChat
		if c.host == hostOf(DefaultBaseURL) || needsResponses(cfg.Model) {
			c.transport = APIResponses
		}
	}
	return c
}

// Model returns the model name the client sends.
func (c *Client) Model() string { return c.model }

// API returns the transport in use now: APIChat or APIResponses.
func (c *Client) API() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transport
}

// Effort returns the reasoning effort sent ("" for none).
func (c *Client) Effort() string { return c.effort }

// plan is what one attempt sends: the client's knowledge at its start.
type plan struct {
	transport     string
	format        agent.FormatKind // "" for no response format
	schema        int
	dropped       map[string]bool
	maxCompletion bool
	effort        string // "" sends none
}

// sampling reports whether temperature may be sent: the API rejects it
// while a model reasons (go-openai's reasoning_validator.go,
// ErrReasoningSamplingUnsupported).
func (p plan) sampling() bool { return p.effort == "" || p.effort == "none" }

// plan returns what the next attempt of req sends. The reasoning effort
// (TIDYBOT_REASONING_EFFORT) goes to reasoning models (by name, or any
// model with Config.ReasoningModel), default DefaultEffort; temperature
// goes only when the model does not reason (see sampling).
func (c *Client) plan(req agent.Request) plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := plan{transport: c.transport, schema: c.schema, dropped: maps.Clone(c.dropped), maxCompletion: c.maxCompletion, effort: c.effort}
	p.format = formatFor(req.Format, c.best)
	if p.dropped["reasoning"] || p.dropped["reasoning_effort"] {
		p.effort = ""
	}
	if p.transport == APIChat && len(req.Tools) > 0 && toolsNeedNoReasoning(c.model) && c.cfg.ReasoningEffort == "" {
		// Chat Completions takes tools from these models only without
		// reasoning; the effort was not chosen, so this is no surprise.
		p.effort = "none"
	}
	return p
}

// For returns the client that asks model: c for its own model or an
// empty name, else one made like c with that model (OPENAI_REASONING_MODEL
// is about OPENAI_MODEL only: another model reasons by its name).
func (c *Client) For(model string) *Client {
	if model == "" || model == c.model {
		return c
	}
	c.othersMu.Lock()
	defer c.othersMu.Unlock()
	if o := c.others[model]; o != nil {
		return o
	}
	cfg := c.cfg
	cfg.Model, cfg.ReasoningModel = model, false
	o := New(cfg, c.hc)
	if c.others == nil {
		c.others = map[string]*Client{}
	}
	c.others[model] = o
	return o
}

// Complete implements agent.Model. A request naming another model
// (Request.Model) is made by that model's client (see For).
func (c *Client) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	if o := c.For(req.Model); o != c {
		return o.Complete(ctx, req)
	}
	grown := false
	var spent agent.Usage // tokens of replies cut off and asked again
	req.MaxTokens = c.fit(req)
	for {
		p := c.plan(req)
		var (
			out agent.Response
			err error
		)
		// A server that refused stream (400 unsupported_parameter) is
		// asked without it from then on (adapt).
		stream := req.Stream != nil && !p.dropped["stream"]
		switch {
		case p.transport == APIResponses && stream:
			out, err = c.completeResponsesStream(ctx, req, p)
		case p.transport == APIResponses:
			out, err = c.completeResponses(ctx, req, p)
		case stream:
			out, err = c.completeChatStream(ctx, req, p)
		default:
			out, err = c.completeChat(ctx, req, p)
		}
		if err != nil {
			if ctx.Err() == nil && c.adapt(err, req, p) {
				continue
			}
			if room := c.shrink(err, req); room > 0 {
				req.MaxTokens = room
				continue
			}
			if p.transport == APIResponses {
				return agent.Response{}, fmt.Errorf("openai: response: %w", err)
			}
			return agent.Response{}, fmt.Errorf("openai: chat completion: %w", err)
		}
		// A reply cut off at the token limit (finish_reason "length", or
		// an incomplete response for max_output_tokens) is asked again
		// once with twice the limit; cut off again, the call fails with
		// a message that says so.
		if out.FinishReason != "length" {
			spent.Calls = 0
			out.Usage.Add(spent)
			return out, nil
		}
		if grown || req.MaxTokens <= 0 {
			return agent.Response{}, fmt.Errorf("openai: %s: %w", p.transport, &agent.Error{Code: agent.ErrInvalid,
				Message: fmt.Sprintf("the model's reply was cut off at its limit of %d tokens (TIDYBOT_MAX_TOKENS): raise the limit, or ask for fewer tasks at a time", req.MaxTokens)})
		}
		c.log.InfoContext(ctx, "openai: the reply was cut off at the token limit; asking again with twice the limit",
			slog.String("model", c.model), slog.Int("max_tokens", req.MaxTokens))
		grown = true
		spent.Add(out.Usage)
		req.MaxTokens *= 2
	}
}

// adapt learns from err what the server does not support, when it says
// so, and reports whether the call is worth making again. What it learns
// is measured against p, the knowledge the failed attempt had (another
// call may have learnt it meanwhile), and each attempt of a call knows
// strictly more than the one before, so a call makes few attempts.
func (c *Client) adapt(err error, req agent.Request, p plan) bool {
	var e *apiError
	if !errors.As(err, &e) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	field := unsupportedParam(e)
	switch {
	// With OPENAI_API=auto, a server that answers 404 for /responses gets
	// Chat Completions from then on, and one whose 400 on Chat
	// Completions asks for /v1/responses gets the Responses API.
	case p.transport == APIResponses && c.cfg.API == APIAuto && routeMissing(e):
		c.noResponses = true
		if c.transport == APIResponses {
			c.transport = APIChat
			c.log.Warn("openai: the server has no Responses API (404 for /responses); using Chat Completions from now on",
				slog.String("host", c.host), slog.String("model", c.model))
		}
		return true
	case p.transport == APIChat && c.cfg.API == APIAuto && !c.noResponses && wantsResponses(e):
		if c.transport == APIChat {
			c.transport = APIResponses
			c.log.Warn("openai: the server wants the Responses API for this model; using it from now on",
				slog.String("host", c.host), slog.String("model", c.model))
		}
		return true
	// A 400 unsupported_parameter naming a field (reasoning on a server
	// without it; max_tokens, which reasoning models refuse) drops that
	// field, or sends max_completion_tokens instead, and retries.
	case field == "max_tokens" && !p.maxCompletion:
		if !c.maxCompletion {
			c.maxCompletion = true
			c.log.Warn("openai: the server wants max_completion_tokens for this model; sending it from now on", slog.String("model", c.model))
		}
		return true
	case field != "" && field != "max_tokens" && !essential[field] && !p.dropped[field]:
		if !c.dropped[field] {
			c.dropped[field] = true
			c.log.Warn("openai: the server does not support a request field; leaving it out from now on",
				slog.String("model", c.model), slog.String("field", field))
		}
		return true
	// A 400 that rejects a strict tool or response schema steps down:
	// strict with only the core keywords, then not strict (the engine
	// validates every reply locally anyway).
	case schemaRejected(e) && p.schema < schemaLoose && hasStrict(req):
		if c.schema <= p.schema {
			c.schema = p.schema + 1
			level := "strict, core keywords only"
			if c.schema == schemaLoose {
				level = "not strict (replies are still validated locally)"
			}
			c.log.Warn("openai: the server rejected the action schemas; sending them "+level+" from now on",
				slog.String("model", c.model), slog.String("error", e.Error()))
		}
		return true
	// A 400 that rejects the json_schema response format gets
	// json_object instead, then plain text (reported in
	// Response.Format).
	case p.format != "" && formatUnsupported(err, p.format):
		next := agent.FormatText
		if p.format == agent.FormatJSONSchema {
			next = agent.FormatJSONObject
		}
		if rank(next) < rank(c.best) {
			c.best = next
			c.log.Warn("openai: the server does not support this response format; using a weaker one from now on",
				slog.String("host", c.host), slog.String("format", string(p.format)), slog.String("now", string(next)))
		}
		return true
	}
	return false
}

// minReply is the smallest token limit worth asking a server for.
const minReply = 256

// shrink returns a smaller token limit for req when err says the
// server's context cannot hold the prompt plus req.MaxTokens (a local
// server with a short context and the default TIDYBOT_MAX_TOKENS; vLLM's
// 400 "maximum context length is N tokens … (M in the messages …"), and
// remembers the context length; 0 when there is none worth trying.
func (c *Client) shrink(err error, req agent.Request) int {
	var e *apiError
	if !errors.As(err, &e) {
		return 0
	}
	length, room, ok := contextRoom(e)
	if !ok || room < minReply || (req.MaxTokens > 0 && room >= req.MaxTokens) {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.context != length {
		c.context = length
		c.log.Warn("openai: the server's context is shorter than the prompt plus TIDYBOT_MAX_TOKENS; asking for shorter replies from now on",
			slog.String("model", c.model), slog.Int("context", length))
	}
	return room
}

// fit returns req's token limit, lowered to what a context learnt from
// the server leaves after the prompt (estimated generously, so that the
// server need not refuse again).
func (c *Client) fit(req agent.Request) int {
	c.mu.Lock()
	length := c.context
	c.mu.Unlock()
	if length == 0 {
		return req.MaxTokens
	}
	est := EstimatePromptTokens(req)
	room := length - est - est/4 - 64
	if room < minReply || (req.MaxTokens > 0 && room >= req.MaxTokens) {
		return req.MaxTokens
	}
	return room
}

// essential are request fields a call cannot do without.
var essential = map[string]bool{"model": true, "messages": true, "input": true, "tools": true, "text": true, "response_format": true, "tool_choice": true}

// rank orders response formats, strongest last.
func rank(k agent.FormatKind) int {
	switch k {
	case agent.FormatJSONSchema:
		return 2
	case agent.FormatJSONObject:
		return 1
	}
	return 0
}

// formatFor returns the format to send for f: f's kind, or best if the
// server is known to support nothing stronger. "" means no format.
func formatFor(f *agent.ResponseFormat, best agent.FormatKind) agent.FormatKind {
	if f == nil || f.Kind == "" || f.Kind == agent.FormatText {
		return ""
	}
	k := f.Kind
	if k == agent.FormatJSONSchema && len(f.Schema) == 0 {
		k = agent.FormatJSONObject
	}
	if rank(best) < rank(k) {
		k = best
	}
	if k == agent.FormatText {
		return ""
	}
	return k
}

// reasoningModel reports whether model is one of OpenAI's reasoning
// models, which take max_completion_tokens and a reasoning effort, and
// no temperature while they reason (go-openai checks the same prefixes).
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

func (c *Client) reasoning() bool { return c.cfg.ReasoningModel || reasoningModel(c.model) }

// needsResponses reports whether go-openai refuses tools on Chat
// Completions for model at any effort but "none" (reasoning_validator.go:
// the published GPT-6 ids).
func needsResponses(model string) bool {
	switch model {
	case goopenai.GPT6Luna, goopenai.GPT6Sol, goopenai.GPT6Astra, goopenai.GPT6Dot1Sol:
		return true
	}
	return false
}

// toolsNeedNoReasoning reports whether model takes tools on Chat
// Completions with reasoning effort "none" only (reasoning_validator.go:
// validateGPT6ChatParams with supportsNone).
func toolsNeedNoReasoning(model string) bool {
	return model == goopenai.GPT6Luna || model == goopenai.GPT6Sol
}

// noParallelToolCalls reports whether model answers 400
// unsupported_parameter to parallel_tool_calls: o1, o3, o3-mini and
// o4-mini (the 400 is quoted in evalstate/fast-agent#279 for o4-mini and
// langchain-ai/langchain#29704 for o3-mini; langgraph-supervisor-py#125
// lists o3 too).
func noParallelToolCalls(model string) bool {
	for _, p := range []string{"o1", "o3", "o4-mini"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// Check reports, before any call, a configuration that go-openai would
// refuse on every call: tools on Chat Completions for a model that takes
// them only through the Responses API at the chosen effort. The message
// names the model and the setting to change.
func (c *Client) Check(tools bool) error {
	p := c.plan(agent.Request{})
	if p.transport != APIChat {
		return nil
	}
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, MaxTokens: 1}
	if tools {
		req.Tools = []agent.Tool{{Name: "final_answer", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
		req.ToolChoice = "required"
		p = c.plan(req)
	}
	err := goopenai.NewReasoningValidator().Validate(c.chatRequest(req, p))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, goopenai.ErrReasoningToolsRequireResponses):
		fix := "set OPENAI_API=responses (or auto)"
		if toolsNeedNoReasoning(c.model) {
			fix += ", or TIDYBOT_REASONING_EFFORT=none"
		}
		return fmt.Errorf("OPENAI_MODEL=%s calls tools only through the Responses API at reasoning effort %q, and OPENAI_API=%s chose Chat Completions: %s", c.model, p.effort, c.cfg.API, fix)
	case errors.Is(err, goopenai.ErrReasoningEffortUnsupported):
		return fmt.Errorf("TIDYBOT_REASONING_EFFORT=%s is not supported by OPENAI_MODEL=%s on Chat Completions: choose another effort, or OPENAI_API=responses", p.effort, c.model)
	}
	return fmt.Errorf("OPENAI_MODEL=%s: go-openai refuses the request this configuration makes: %s", c.model, c.redact(err.Error()))
}

// toolOptions returns the tool_choice and parallel_tool_calls to send
// with req's tools, alike on both transports: a mode as it is, a tool's
// name as named(name) (each API has its own shape for it), and
// parallel_tool_calls unless the model rejects it. Nil sends nothing: the
// API refuses both without tools.
func (c *Client) toolOptions(req agent.Request, named func(string) any) (choice any, parallel *bool) {
	if len(req.Tools) == 0 {
		return nil, nil
	}
	switch req.ToolChoice {
	case "":
	// Constants, which need no allocation to become an any.
	case "auto":
		choice = "auto"
	case "required":
		choice = "required"
	case "none":
		choice = "none"
	default:
		choice = named(req.ToolChoice)
	}
	if !noParallelToolCalls(c.model) {
		// A copy: a pointer into req would move all of req to the heap.
		v := req.ParallelToolCalls
		parallel = &v
	}
	return choice, parallel
}

// chatRequest maps req onto go-openai's Chat Completions request.
func (c *Client) chatRequest(req agent.Request, p plan) goopenai.ChatCompletionRequest {
	out := goopenai.ChatCompletionRequest{Model: c.model, Messages: make([]goopenai.ChatCompletionMessage, 0, len(req.Messages))}
	for _, m := range req.Messages {
		om := goopenai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		if len(m.Images) > 0 {
			// Images are image_url content parts with a base64 data
			// URL (platform.openai.com/docs/guides/images-vision).
			om.Content = ""
			om.MultiContent = []goopenai.ChatMessagePart{{Type: goopenai.ChatMessagePartTypeText, Text: m.Content}}
			for _, im := range m.Images {
				om.MultiContent = append(om.MultiContent, goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeImageURL,
					ImageURL: &goopenai.ChatMessageImageURL{URL: dataURL(im), Detail: goopenai.ImageURLDetailAuto}})
			}
		}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, goopenai.ToolCall{
				ID:       tc.ID,
				Type:     goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		out.Messages = append(out.Messages, om)
	}
	out.Tools = c.chatTools(req.Tools, p.schema)
	choice, parallel := c.toolOptions(req, func(name string) any {
		return goopenai.ToolChoice{Type: goopenai.ToolTypeFunction, Function: goopenai.ToolFunction{Name: name}}
	})
	out.ToolChoice = choice
	if parallel != nil {
		out.ParallelToolCalls = *parallel
	}
	switch p.format {
	case agent.FormatJSONSchema:
		schema, strict := formatSchema(req.Format, p.schema)
		out.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   formatName(req.Format),
				Schema: schema,
				Strict: strict,
			},
		}
	case agent.FormatJSONObject:
		out.ResponseFormat = &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}
	}
	if req.MaxTokens > 0 {
		if p.maxCompletion {
			out.MaxCompletionTokens = req.MaxTokens
		} else {
			// Every OpenAI-compatible server (Ollama, vLLM, LM Studio,
			// Azure) understands max_tokens; the newer field is not.
			//lint:ignore SA1019 deliberate, see above
			out.MaxTokens = req.MaxTokens
		}
	}
	out.ReasoningEffort = p.effort
	if p.sampling() {
		// Temperature 0 is sent as 0: go-openai's field is
		// `temperature,omitempty`, so a 0 would be dropped and the
		// server's default (1 on OpenAI) apply; editBody puts an
		// explicit "temperature":0 back into the body.
		out.Temperature = req.Temperature
	}
	return out
}

// chatEdit is the body edit of creq, a Chat Completions call for req:
// dropped parameters, an explicit zero temperature, and creq's tools,
// taken out of creq to go in as encoded once (go-openai would encode the
// same tool schemas, most of the request, on every call). A request
// go-openai refuses keeps its tools, so that it says why.
func (c *Client) chatEdit(req agent.Request, p plan, creq *goopenai.ChatCompletionRequest) bodyEdit {
	edit := bodyEdit{drop: p.dropped, zeroTemperature: p.sampling() && req.Temperature == 0 && !p.dropped["temperature"]}
	if len(creq.Tools) > 0 && goopenai.NewReasoningValidator().Validate(*creq) == nil {
		if tools := c.encodedTools(creq.Tools); tools != nil {
			creq.Tools, edit.tools = nil, tools
		}
	}
	return edit
}

// completeChat makes one call on Chat Completions.
func (c *Client) completeChat(ctx context.Context, req agent.Request, p plan) (agent.Response, error) {
	creq := c.chatRequest(req, p)
	edit := c.chatEdit(req, p, &creq)
	var resp goopenai.ChatCompletionResponse
	err := c.send(ctx, edit, func(ctx context.Context) (http.Header, error) {
		var err error
		resp, err = c.api.CreateChatCompletion(ctx, creq)
		return resp.Header(), err
	})
	if err != nil {
		return agent.Response{}, err
	}
	return c.chatResponse(req, p.format, resp)
}

// chatResponse maps go-openai's chat response onto the agent's.
func (c *Client) chatResponse(req agent.Request, format agent.FormatKind, resp goopenai.ChatCompletionResponse) (agent.Response, error) {
	if len(resp.Choices) == 0 {
		return agent.Response{}, &agent.Error{Code: agent.ErrServer, Message: "the model API sent an answer without choices"}
	}
	ch := resp.Choices[0]
	out := agent.Response{
		Content:      ch.Message.Content,
		FinishReason: string(ch.FinishReason),
		Format:       format,
	}
	if out.Format == "" {
		out.Format = agent.FormatText
	}
	if out.Content == "" && ch.Message.Refusal != "" {
		// A structured-outputs refusal: the agent treats it as a reply
		// that does not parse, and says so.
		out.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	u := resp.Usage
	out.Usage = agent.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Calls: 1}
	if d := u.PromptTokensDetails; d != nil {
		out.Usage.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.Usage.ReasoningTokens = d.ReasoningTokens
	}
	if out.Usage.PromptTokens == 0 && out.Usage.CompletionTokens == 0 {
		// A server that reports no usage gets a local estimate
		// (tiktoken; Usage.Estimated).
		out.Usage = EstimateUsage(req, out)
	}
	return out, nil
}

// chatTools returns tools as go-openai's, at schema level, made only
// when they differ from the last tools asked for (the agent sends the
// same tools on every call). The slice returned is shared: it is read,
// never changed.
func (c *Client) chatTools(tools []agent.Tool, level int) []goopenai.Tool {
	if len(tools) == 0 {
		return nil
	}
	c.toolsMu.Lock()
	defer c.toolsMu.Unlock()
	m := &c.tools
	if level == m.level && slices.EqualFunc(m.from, tools, sameTool) {
		return m.built
	}
	out := make([]goopenai.Tool, 0, len(tools))
	from := make([]agent.Tool, 0, len(tools))
	for _, t := range tools {
		// The caller's schema is kept as it is now, to compare the next
		// call's with.
		t.Parameters = bytes.Clone(t.Parameters)
		from = append(from, t)
		params, strict := toolSchema(t, level)
		out = append(out, goopenai.Tool{
			Type: goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Strict:      strict,
				Parameters:  params,
			},
		})
	}
	m.from, m.level, m.built, m.json = from, level, out, nil
	return out
}

func sameTool(a, b agent.Tool) bool {
	return a.Name == b.Name && a.Description == b.Description && a.Strict == b.Strict && bytes.Equal(a.Parameters, b.Parameters)
}

// encodedTools returns tools, which chatTools made, as go-openai would
// encode them in a request, or nil if they cannot be encoded. The
// encoding is kept with the tools chatTools keeps: the same tools are
// encoded once. (Tools chatTools has made others in place of since, for
// another run's request, are encoded again.)
func (c *Client) encodedTools(tools []goopenai.Tool) []byte {
	c.toolsMu.Lock()
	defer c.toolsMu.Unlock()
	m := &c.tools
	kept := len(tools) > 0 && len(tools) == len(m.built) && &tools[0] == &m.built[0]
	if kept && m.json != nil {
		return m.json
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil
	}
	if kept {
		m.json = b
	}
	return b
}

// DefaultMaxResponseBytes is Config.MaxResponseBytes' default: 16 MiB.
// The longest answer a call allows (agent.DefaultMaxTokens) is about
// 100 KB of text, but streamed it is an event a token, each a
// chat.completion.chunk (API reference, "The chat completion chunk
// object") of some 200 to 300 bytes: 5 to 7 MB. The cap is for a
// runaway server, never for that answer (TestLongestStreamedAnswerFits).
const DefaultMaxResponseBytes = 16 << 20

// errTooLarge is reading past Config.MaxResponseBytes of an answer.
var errTooLarge = errors.New("the answer is larger than the limit")

// doer is the HTTP client go-openai sends through; each answer's body is
// read up to max bytes.
type doer struct {
	hc  *http.Client
	max int64
}

// cappedBody fails a read past its limit with errTooLarge.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// editKey marks, in a request's context, the bodyEdit its body needs.
type editKey struct{}

// Do implements go-openai's HTTPDoer.
func (d doer) Do(req *http.Request) (*http.Response, error) {
	if e, ok := req.Context().Value(editKey{}).(bodyEdit); ok && e.needed() && req.Body != nil {
		r, err := editBody(req, e)
		if err != nil {
			return nil, err
		}
		req = r
	}
	resp, err := d.hc.Do(req)
	if h, ok := req.Context().Value(headerKey{}).(*http.Header); ok && resp != nil {
		*h = resp.Header
	}
	if resp != nil && d.max > 0 {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: d.max}
	}
	return resp, err
}

// headerKey marks, in a request's context, where to keep the answer's
// headers: go-openai's stream calls return none with an error, and a
// 429's Retry-After is among them.
type headerKey struct{}

// dataURL is an image as a base64 data URL.
func dataURL(im agent.Image) string {
	return "data:" + im.MIME + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}
