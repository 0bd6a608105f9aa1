// Package openai implements agent.Model on github.com/sashabaranov/go-openai
// against the chat-completions API of OpenAI or of any OpenAI-compatible
// server (Azure OpenAI's v1 endpoint, Ollama, vLLM, LM Studio, llama.cpp),
// chosen by the base URL (OPENAI_BASE_URL).
//
// What it does beyond mapping types:
//
//   - Temperature 0 is sent as 0. go-openai's ChatCompletionRequest has
//     `temperature,omitempty`, so a 0 is dropped from the JSON and the
//     server's default applies instead (1 on OpenAI); the client puts an
//     explicit "temperature":0 back into the body (see zeroTemperature).
//     Reasoning models (o1, o3, o4, gpt-5…), which accept only their
//     default, get no temperature at all.
//   - The token limit goes out as max_tokens, the name every compatible
//     server understands; reasoning models get max_completion_tokens,
//     which they require (and go-openai refuses max_tokens for them before
//     sending). Config.MaxCompletionTokens forces the newer name.
//   - 429s, 5xx answers and network errors are retried, honouring
//     Retry-After (and OpenAI's retry-after-ms), else with exponential
//     backoff and jitter, within a cap on the total wait; a 429 for an
//     exhausted quota is not retried. Other 4xx answers are final.
//   - A server that rejects response_format json_schema with a 400 gets
//     json_object instead, then plain text; the downgrade is remembered for
//     the client's later calls and reported in Response.Format.
//   - Usage comes from the answer's usage; a server that reports none gets
//     a local estimate with tiktoken (Usage.Estimated).
//
// Every error Complete returns, other than the context's, wraps an
// *agent.Error whose message is safe to show a user. The API key never
// appears in an error or a log line: messages from the server are
// redacted before they are kept.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
)

// Defaults of Config.
const (
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultModel        = "gpt-4.1-mini"
	DefaultMaxRetryWait = 60 * time.Second
	DefaultBackoffBase  = 500 * time.Millisecond
	DefaultBackoffMax   = 20 * time.Second
)

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
	// MaxCompletionTokens sends the token limit as max_completion_tokens
	// for every model, not only for reasoning models.
	MaxCompletionTokens bool

	// MaxRetryWait caps the total time one Complete waits between
	// attempts (after 429s, 5xx answers and network errors): once the next
	// wait would pass it, the call fails with the last error. Default
	// DefaultMaxRetryWait; negative turns retries off.
	MaxRetryWait time.Duration
	// BackoffBase and BackoffMax shape the backoff used when the server
	// gives no Retry-After: the n-th retry waits about BackoffBase·2ⁿ,
	// with jitter, at most BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Sleep waits between attempts; it must return ctx.Err() if ctx ends
	// first. Tests replace it to record waits instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives retries (debug) and format downgrades (warn).
	// Default: discard.
	Logger *slog.Logger
}

// Client is an agent.Model on an OpenAI-compatible chat-completions API.
// It is safe for concurrent use.
type Client struct {
	api   *goopenai.Client
	model string
	key   string
	host  string
	cfg   Config
	log   *slog.Logger

	mu sync.Mutex // protects best
	// best is the strongest response format the server has not refused.
	best agent.FormatKind
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
	if cfg.MaxRetryWait == 0 {
		cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	if cfg.Sleep == nil {
		cfg.Sleep = sleepContext
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
	oc.HTTPClient = doer{hc}
	return &Client{
		api:   goopenai.NewClientWithConfig(oc),
		model: cfg.Model,
		key:   cfg.APIKey,
		host:  hostOf(cfg.BaseURL),
		cfg:   cfg,
		log:   log,
		best:  agent.FormatJSONSchema,
	}
}

// Complete implements agent.Model.
func (c *Client) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	format := c.format(req.Format)
	for {
		creq := c.chatRequest(req, format)
		resp, err := c.send(ctx, creq, c.sendsZeroTemperature(req))
		if err != nil {
			if weaker, ok := c.downgrade(err, format); ok {
				format = weaker
				continue
			}
			return agent.Response{}, fmt.Errorf("openai: chat completion: %w", err)
		}
		out, err := c.response(req, format, resp)
		if err != nil {
			return agent.Response{}, fmt.Errorf("openai: chat completion: %w", err)
		}
		return out, nil
	}
}

// Model returns the model name the client sends.
func (c *Client) Model() string { return c.model }

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

// format returns the format to send for f: f's kind, or a weaker one
// the server is known to support. "" means no response_format.
func (c *Client) format(f *agent.ResponseFormat) agent.FormatKind {
	if f == nil || f.Kind == "" || f.Kind == agent.FormatText {
		return ""
	}
	k := f.Kind
	if k == agent.FormatJSONSchema && len(f.Schema) == 0 {
		k = agent.FormatJSONObject
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rank(c.best) < rank(k) {
		k = c.best
	}
	if k == agent.FormatText {
		return ""
	}
	return k
}

// downgrade reports the next weaker format to try after err, when err
// says the server does not support format, and remembers it.
func (c *Client) downgrade(err error, format agent.FormatKind) (agent.FormatKind, bool) {
	if format == "" || !formatUnsupported(err, format) {
		return "", false
	}
	next := agent.FormatText
	if format == agent.FormatJSONSchema {
		next = agent.FormatJSONObject
	}
	c.mu.Lock()
	if rank(next) < rank(c.best) {
		c.best = next
	}
	c.mu.Unlock()
	c.log.Warn("openai: the server does not support this response format; using a weaker one from now on",
		slog.String("host", c.host), slog.String("format", string(format)), slog.String("now", string(next)))
	if next == agent.FormatText {
		return "", true
	}
	return next, true
}

// reasoningModel reports whether model is one of OpenAI's reasoning
// models, which take max_completion_tokens and no temperature (go-openai
// checks the same prefixes).
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// sendsZeroTemperature reports whether req asks for temperature 0, which
// go-openai would drop from the body.
func (c *Client) sendsZeroTemperature(req agent.Request) bool {
	return req.Temperature == 0 && !reasoningModel(c.model)
}

// chatRequest maps req onto go-openai's request, with the response
// format kind (which may be weaker than req's).
func (c *Client) chatRequest(req agent.Request, format agent.FormatKind) goopenai.ChatCompletionRequest {
	out := goopenai.ChatCompletionRequest{Model: c.model}
	for _, m := range req.Messages {
		om := goopenai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, goopenai.ToolCall{
				ID:       tc.ID,
				Type:     goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		out.Messages = append(out.Messages, om)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, goopenai.Tool{
			Type: goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Strict:      t.Strict,
				Parameters:  params,
			},
		})
	}
	if len(out.Tools) > 0 {
		// The API refuses tool_choice and parallel_tool_calls without tools.
		switch req.ToolChoice {
		case "":
		case "auto", "required", "none":
			out.ToolChoice = req.ToolChoice
		default:
			out.ToolChoice = goopenai.ToolChoice{Type: goopenai.ToolTypeFunction, Function: goopenai.ToolFunction{Name: req.ToolChoice}}
		}
		out.ParallelToolCalls = req.ParallelToolCalls
	}
	switch format {
	case agent.FormatJSONSchema:
		name := req.Format.Name
		if name == "" {
			name = "response"
		}
		out.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   name,
				Schema: req.Format.Schema,
				Strict: req.Format.Strict,
			},
		}
	case agent.FormatJSONObject:
		out.ResponseFormat = &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}
	}
	reasoning := reasoningModel(c.model)
	if req.MaxTokens > 0 {
		if reasoning || c.cfg.MaxCompletionTokens {
			out.MaxCompletionTokens = req.MaxTokens
		} else {
			// Every OpenAI-compatible server (Ollama, vLLM, LM Studio,
			// Azure) understands max_tokens; the newer field is not.
			//lint:ignore SA1019 deliberate, see above
			out.MaxTokens = req.MaxTokens
		}
	}
	if !reasoning {
		// 0 is dropped by omitempty; sendsZeroTemperature puts it back.
		out.Temperature = req.Temperature
	}
	return out
}

// response maps go-openai's response onto the agent's.
func (c *Client) response(req agent.Request, format agent.FormatKind, resp goopenai.ChatCompletionResponse) (agent.Response, error) {
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
	out.Usage = agent.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, Calls: 1}
	if out.Usage.PromptTokens == 0 && out.Usage.CompletionTokens == 0 {
		out.Usage = EstimateUsage(req, out)
	}
	return out, nil
}

// doer is the HTTP client go-openai sends through.
type doer struct{ hc *http.Client }

// zeroTemperatureKey marks, in a request's context, a chat-completion
// request that must carry "temperature":0.
type zeroTemperatureKey struct{}

// Do implements go-openai's HTTPDoer.
func (d doer) Do(req *http.Request) (*http.Response, error) {
	if req.Context().Value(zeroTemperatureKey{}) != nil && req.Body != nil {
		r, err := zeroTemperature(req)
		if err != nil {
			return nil, err
		}
		req = r
	}
	return d.hc.Do(req)
}
