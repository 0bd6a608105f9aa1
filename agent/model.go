package agent

import (
	"context"
	"encoding/json"
)

// Role is who wrote a chat message.
type Role string

// Roles of chat messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message sent to or received from a model.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message makes (tools protocol).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// State is what the model API asked to be given back with this
	// assistant message on later calls (the Responses API's encrypted
	// reasoning items), opaque to the engine, which keeps it in the
	// transcript so that nothing need be held on the server's side.
	State json.RawMessage `json:"state,omitempty"`
	// Images go with a user message as image inputs (a photo of a list).
	Images []Image `json:"images,omitempty"`
}

// Image is an image input: its bytes and media type (image/jpeg,
// image/png, image/webp or image/gif).
type Image struct {
	MIME string `json:"mime"`
	Data []byte `json:"data"`
}

// ToolCall is one function call in a model reply. Arguments is the raw JSON
// text the model wrote, which may be invalid.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

// FormatKind is the response format asked of the model.
type FormatKind string

// Response formats, best first.
const (
	FormatJSONSchema FormatKind = "json_schema"
	FormatJSONObject FormatKind = "json_object"
	FormatText       FormatKind = "text"
)

// ResponseFormat constrains a model's reply (json protocol).
type ResponseFormat struct {
	Kind   FormatKind      `json:"kind"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// Request is one chat-completion call.
type Request struct {
	// Model, when set, names the model to ask (a person's model tier);
	// empty: the Model's configured one.
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is "required", "auto" or "" (no tools).
	ToolChoice        string
	ParallelToolCalls bool
	// Format is nil for no constraint.
	Format      *ResponseFormat
	MaxTokens   int
	Temperature float32
	// Stream, when set, asks for the reply to be streamed and hears its
	// pieces as they arrive (see Delta); the Response is the same as
	// without it. A Model that cannot stream ignores it. It must not
	// block.
	Stream func(Delta) `json:"-"`
}

// Overheads of PromptBound, in tokens: more than any chat format adds
// around a request, a message, a tool call or a tool definition (OpenAI's
// cookbook counts 3 a message and a reply; tool definitions are wrapped in
// a few words of their own).
const (
	boundPerRequest = 16
	boundPerItem    = 16
)

// PromptBound is a cheap upper bound of the prompt tokens of req for any
// byte-level BPE tokenizer (tiktoken's, those of the Llama 3 family, any
// SentencePiece one with byte fallback): each token stands for at least
// one byte of text, so a text never has more tokens than bytes, and each
// message, tool call and tool costs at most boundPerItem tokens of
// framing. Every byte the request carries counts, images and the model's
// opaque state included, so that no count of them can exceed it.
func PromptBound(req Request) int {
	n := boundPerRequest
	for _, m := range req.Messages {
		n += boundPerItem + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.State)
		for _, tc := range m.ToolCalls {
			n += boundPerItem + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
		for _, im := range m.Images {
			n += boundPerItem + len(im.MIME) + len(im.Data)
		}
	}
	for _, t := range req.Tools {
		n += boundPerItem + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if f := req.Format; f != nil {
		n += boundPerItem + len(f.Name) + len(f.Schema)
	}
	return n
}

// DefaultMaxTokens is the default response limit of one model call: room
// for the largest batch the action schemas allow (add_tasks with 100
// tasks, every bounded field at its longest: about 17,400 tokens,
// measured in agent/openai's TestDefaultMaxTokensHoldsTheLargestBatch),
// a thought, and the reasoning a model does before it answers, which
// counts against the same limit.
const DefaultMaxTokens = 24576

// Usage counts the tokens of one or more model calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// ReasoningTokens are the part of CompletionTokens the model spent
	// reasoning; CachedTokens the part of PromptTokens served from the
	// server's prompt cache (both 0 when the server does not say).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	CachedTokens    int `json:"cached_tokens,omitempty"`
	// Calls is the number of model calls counted.
	Calls int `json:"calls"`
	// Estimated is set when a server reported no usage and the counts were
	// estimated locally.
	Estimated bool `json:"estimated,omitempty"`
}

// Total is prompt plus completion tokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Add adds v to u.
func (u *Usage) Add(v Usage) {
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.ReasoningTokens += v.ReasoningTokens
	u.CachedTokens += v.CachedTokens
	u.Calls += v.Calls
	u.Estimated = u.Estimated || v.Estimated
}

// Response is a model's reply to a Request.
type Response struct {
	Content   string
	ToolCalls []ToolCall
	// FinishReason is the server's reason ("stop", "length", "tool_calls").
	FinishReason string
	// Usage is as the server reported it (Calls is 1). When the server
	// reports none, implementations estimate it and set Estimated.
	Usage Usage
	// Format is the response format actually used, which may be weaker
	// than the one asked for when the server does not support it.
	Format FormatKind
	// State, when set, is to be kept as the State of the assistant
	// message that records this reply.
	State json.RawMessage
}

// Model is a chat-completion model. agent/openai implements it.
type Model interface {
	// Complete sends one request and returns the reply. Rate limits and
	// server errors are retried inside; the error returned is final and
	// never contains a secret.
	Complete(ctx context.Context, req Request) (Response, error)
}
