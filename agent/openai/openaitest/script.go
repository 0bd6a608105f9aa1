package openaitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Script decides the reply to each request that passes the server's
// checks. The server calls it with one request at a time.
type Script func(req Request) Reply

// Reply is the scripted answer to one request: a completion (Content
// and/or ToolCalls) or, when Status is set, an HTTP error.
type Reply struct {
	// Content is the assistant's text: anything, malformed JSON included.
	Content string
	// ToolCalls are the function calls of the reply.
	ToolCalls []ToolCall
	// Output, when set, is the reply's output items on the Responses API
	// in this order (two messages, a reasoning item between a message
	// and a call), for a script that needs an order other than the
	// default: reasoning, message, calls. Content and ToolCalls are
	// then taken from it (the texts joined), for Chat Completions and
	// for the usage.
	Output []Item
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise; "length" simulates a cut-off reply.
	FinishReason string
	// Usage, if set, is reported as is. Otherwise the server reports
	// EstimateUsage, unless NoUsage (or WithoutUsage) asks for none.
	Usage   *Usage
	NoUsage bool

	// Status, if not 0 or 200, makes the reply an HTTP error with Error as
	// its body (OpenAI's usual body for the status when nil), or Body
	// verbatim (e.g. a proxy's HTML page) when that is set.
	Status int
	Error  *APIError
	Body   string
	// RetryAfter is sent as the Retry-After header of an error ("2", or
	// an HTTP date).
	RetryAfter string
	// Header are more headers of an error answer, such as OpenAI's
	// x-ratelimit-reset-requests.
	Header map[string]string

	// Delay is added to the server's latency before this reply.
	Delay time.Duration

	// StreamError, when set, breaks a streamed answer after
	// StreamFailAfter characters (see FailAfter in stream.go).
	StreamError     *APIError
	StreamFailAfter int
}

// Item is one output item of a Responses reply (Reply.Output).
type Item struct {
	// Type is "reasoning", "message" or "function_call".
	Type string
	// Text and Phase are a message's: its output_text and its phase,
	// "commentary" or "final_answer" (MessagePhase in openai/openai-openapi
	// openapi.yaml).
	Text, Phase string
	// Call is a function_call's.
	Call ToolCall
}

// Reasoning is a reasoning output item.
func Reasoning() Item { return Item{Type: "reasoning"} }

// OutputText is a message output item with its phase.
func OutputText(text, phase string) Item { return Item{Type: "message", Text: text, Phase: phase} }

// FunctionCall is a function_call output item.
func FunctionCall(c ToolCall) Item { return Item{Type: "function_call", Call: c} }

// Usage is the token usage of a completion. ReasoningTokens are part of
// CompletionTokens and CachedTokens part of PromptTokens, as OpenAI
// reports them.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	ReasoningTokens  int
	CachedTokens     int
}

// APIError is the body of an OpenAI error answer:
// {"error":{"message","type","param","code"}}; an empty Param or Code is
// sent as null.
type APIError struct {
	Message string
	Type    string
	Param   string
	Code    string
}

// MarshalJSON implements json.Marshaler.
func (e APIError) MarshalJSON() ([]byte, error) {
	null := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, null(e.Param), null(e.Code)})
}

// Text is a reply with assistant content.
func Text(content string) Reply { return Reply{Content: content} }

// Call is a reply with one tool call.
func Call(name, arguments string) Reply {
	return Reply{ToolCalls: []ToolCall{{Name: name, Arguments: arguments}}}
}

// Calls is a reply with several tool calls (parallel calls).
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Error is an error reply with OpenAI's usual body for status and
// message (the status text when empty).
func Error(status int, message string) Reply {
	e := defaultError(status)
	if message != "" {
		e.Message = message
	}
	return Reply{Status: status, Error: &e}
}

// RateLimited is a 429 with a Retry-After header (none when empty).
func RateLimited(retryAfter string) Reply {
	r := Error(http.StatusTooManyRequests, "")
	r.RetryAfter = retryAfter
	return r
}

// ServerError is a 500.
func ServerError() Reply { return Error(http.StatusInternalServerError, "") }

// BadRequest is a 400 with OpenAI's error body.
func BadRequest(message, param, code string) Reply {
	return Reply{Status: http.StatusBadRequest, Error: &APIError{Message: message, Type: "invalid_request_error", Param: param, Code: code}}
}

// WithUsage returns r reporting the given usage.
func (r Reply) WithUsage(prompt, completion int) Reply {
	r.Usage = &Usage{PromptTokens: prompt, CompletionTokens: completion}
	return r
}

// WithoutUsage returns r reporting no usage.
func (r Reply) WithoutUsage() Reply {
	r.Usage, r.NoUsage = nil, true
	return r
}

// After returns r delayed by d (on top of the server's latency).
func (r Reply) After(d time.Duration) Reply {
	r.Delay = d
	return r
}

// Replies is a script that answers the n-th request that reaches it with
// replies[n-1]. Requests the server rejects itself (a bad strict schema, a
// wrong key, a turned-off response format) do not use up a reply. Past
// the last reply it answers a 400 saying the script ran out.
func Replies(replies ...Reply) Script {
	var mu sync.Mutex
	n := 0
	return func(req Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if n >= len(replies) {
			n++
			return BadRequest(fmt.Sprintf("openaitest: the script has %d replies and no reply for request %d", len(replies), req.Call), "", "openaitest_script_exhausted")
		}
		n++
		return replies[n-1]
	}
}

// FromAgent adapts a scripted model written against the agent's types
// (such as a simulated "competent model") into a Script: the request is
// decoded back into an agent.Request, and the response's content, tool
// calls, finish reason and usage (when it sets any) make the reply.
func FromAgent(model func(agent.Request) agent.Response) Script {
	return func(req Request) Reply {
		resp := model(AgentRequest(req))
		r := Reply{Content: resp.Content, FinishReason: resp.FinishReason}
		for _, c := range resp.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		if resp.Usage.PromptTokens != 0 || resp.Usage.CompletionTokens != 0 {
			r = r.WithUsage(resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
		}
		return r
	}
}

// AgentRequest converts a decoded request into the agent.Request that
// would produce it.
func AgentRequest(req Request) agent.Request {
	out := agent.Request{ToolChoice: req.ToolChoice, MaxTokens: req.MaxTokens}
	for _, m := range req.Messages {
		am := agent.Message{Role: agent.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, u := range m.Images {
			if m := imageURL.FindStringSubmatch(u); m != nil {
				data, _ := base64.StdEncoding.DecodeString(m[2])
				am.Images = append(am.Images, agent.Image{MIME: "image/" + m[1], Data: data})
			}
		}
		for _, c := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out.Messages = append(out.Messages, am)
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, agent.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
	}
	if req.ParallelToolCalls != nil {
		out.ParallelToolCalls = *req.ParallelToolCalls
	}
	if f := req.ResponseFormat; f != nil {
		out.Format = &agent.ResponseFormat{Kind: agent.FormatKind(f.Type), Name: f.Name, Schema: f.Schema, Strict: f.Strict}
	}
	if req.Temperature != nil {
		out.Temperature = float32(*req.Temperature)
	}
	return out
}
