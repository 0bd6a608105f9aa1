package openaitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// Request is a chat-completion or Responses request as the server
// decoded it. A Responses request's input items are mapped onto the same
// messages: function_call items are the tool calls of an assistant
// message, function_call_output items are tool messages, and reasoning
// items are counted in ReasoningItems.
type Request struct {
	// Call is the request's number, from 1, in order of arrival.
	Call int
	// API is APIChat or APIResponses: the endpoint the request came to.
	API      string
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is "auto", "required", "none", the name of the function
	// a {"type":"function"} choice forces, or "" when not sent.
	ToolChoice string
	// ParallelToolCalls is nil when not sent.
	ParallelToolCalls *bool
	// ResponseFormat is nil when not sent.
	ResponseFormat *ResponseFormat
	// MaxTokens is max_tokens, or max_completion_tokens when that was
	// sent instead, or a response's max_output_tokens; MaxTokensField
	// says which ("" when none).
	MaxTokens      int
	MaxTokensField string
	// Temperature is nil when not sent (the server's default applies:
	// 1 on OpenAI).
	Temperature *float64
	TopP        *float64
	// ReasoningEffort is reasoning_effort (Chat Completions) or
	// reasoning.effort (Responses); "" when not sent.
	ReasoningEffort string
	// Store, Include and PreviousResponseID are those of a Responses
	// request (Store is nil when not sent).
	Store              *bool
	Include            []string
	PreviousResponseID string
	// ReasoningItems is how many reasoning items the input carried back,
	// each with encrypted content this server issued.
	ReasoningItems int
	// Replay lists, for a Responses request, where its input does not
	// send back the output items this server issued as they came (ids,
	// phase, order: see replay in responses.go); empty when it does.
	Replay []string
	// Header holds the HTTP headers, Authorization included.
	Header http.Header
	// Body is the request body as sent.
	Body []byte
	// Stream is set when the answer is asked for as server-sent events
	// (stream: true; see stream.go); IncludeUsage when a chat completion
	// asks for its usage in the stream (stream_options.include_usage).
	Stream       bool
	IncludeUsage bool
}

// Message is one chat message of a request.
type Message struct {
	Role string
	// Content is the text, with the text parts of a multi-part content
	// joined.
	Content   string
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// Images are the message's image parts, as the data URLs (or URLs)
	// sent: image_url parts on Chat Completions, input_image on the
	// Responses API.
	Images []string
}

// ToolCall is a function call, in an assistant message of a request or in
// a Reply. Arguments is JSON text, which the model may get wrong.
type ToolCall struct {
	// ID may be left empty in a Reply; the server then makes one up
	// ("call_<call>_<index>").
	ID        string
	Name      string
	Arguments string
}

// Tool is a function definition of a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Strict      bool
}

// ResponseFormat is a request's response_format.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type string
	// Name, Schema and Strict are those of a json_schema format.
	Name   string
	Schema json.RawMessage
	Strict bool
}

// Last returns the last message, or a zero Message if there are none.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolNames returns the names of the request's tools, in order.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// The wire shapes of a request.
type (
	wireRequest struct {
		Model               string          `json:"model"`
		Messages            []wireMessage   `json:"messages"`
		Tools               []wireTool      `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
		ResponseFormat      *wireFormat     `json:"response_format"`
		MaxTokens           *int            `json:"max_tokens"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
		Temperature         *float64        `json:"temperature"`
		TopP                *float64        `json:"top_p"`
		ReasoningEffort     string          `json:"reasoning_effort"`
		Stream              bool            `json:"stream"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	wireMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []wireToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	wireToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	wireTool struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      bool            `json:"strict"`
		} `json:"function"`
	}
	wireFormat struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// decodeRequest decodes and checks a request body. It returns what it
// could decode even when the request is rejected.
func decodeRequest(body []byte) (Request, *statusError) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, invalid("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.) "+err.Error())
	}
	req := Request{API: APIChat, Model: w.Model, ParallelToolCalls: w.ParallelToolCalls, Temperature: w.Temperature, TopP: w.TopP, ReasoningEffort: w.ReasoningEffort}
	var bad *statusError
	fail := func(e *statusError) {
		if bad == nil {
			bad = e
		}
	}
	switch {
	case w.MaxCompletionTokens != nil:
		req.MaxTokens, req.MaxTokensField = *w.MaxCompletionTokens, "max_completion_tokens"
	case w.MaxTokens != nil:
		req.MaxTokens, req.MaxTokensField = *w.MaxTokens, "max_tokens"
	}
	for i, m := range w.Messages {
		msg := Message{Role: m.Role, ToolCallID: m.ToolCallID}
		text, images, err := contentParts(m.Content)
		if err != nil {
			fail(invalid(fmt.Sprintf("messages[%d].content", i), "", fmt.Sprintf("Invalid type for 'messages[%d].content': %v", i, err)))
		}
		if e := checkImages(fmt.Sprintf("messages[%d]", i), m.Role, images); e != nil {
			fail(e)
		}
		msg.Content, msg.Images = text, images
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for i, t := range w.Tools {
		if t.Type != "function" || t.Function == nil {
			fail(invalid(fmt.Sprintf("tools[%d].type", i), "", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)))
			continue
		}
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict})
	}
	if len(w.ToolChoice) > 0 && string(w.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(w.ToolChoice, &s) == nil {
			req.ToolChoice = s
		} else {
			var f struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(w.ToolChoice, &f); err != nil || f.Type != "function" || f.Function.Name == "" {
				fail(invalid("tool_choice", "", "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a function."))
			}
			req.ToolChoice = f.Function.Name
		}
	}
	if f := w.ResponseFormat; f != nil {
		req.ResponseFormat = &ResponseFormat{Type: f.Type}
		if f.JSONSchema != nil {
			req.ResponseFormat.Name = f.JSONSchema.Name
			req.ResponseFormat.Schema = f.JSONSchema.Schema
			req.ResponseFormat.Strict = f.JSONSchema.Strict
		}
	}
	if bad != nil {
		return req, bad
	}
	req.Stream = w.Stream
	req.IncludeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
	if w.StreamOptions != nil && !w.Stream {
		// "stream_options … Only set this when you set stream: true"
		// (API reference, Create chat completion); the API refuses it.
		return req, invalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	return req, validate(req, w)
}

// contentText reads a message's content: null, a string, or an array of
// parts whose text parts are joined.
func contentText(raw json.RawMessage) (string, error) {
	text, _, err := contentParts(raw)
	return text, err
}

// contentParts reads a message's content: a string, or an array of parts
// whose text parts ("text"; "input_text" on the Responses API) are joined
// and whose image parts ("image_url": {"url"} on Chat Completions,
// "input_image" with "image_url" on the Responses API) are returned.
func contentParts(raw json.RawMessage) (string, []string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("expected a string or an array of content parts")
	}
	var b strings.Builder
	var images []string
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		case "image_url":
			var u struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(p.ImageURL, &u)
			images = append(images, u.URL)
		case "input_image":
			var u string
			_ = json.Unmarshal(p.ImageURL, &u)
			images = append(images, u)
		}
	}
	return b.String(), images, nil
}

// imageURL is a base64 data URL of an image in a format the API reads:
// "PNG (.png), JPEG (.jpeg and .jpg), WEBP (.webp), non-animated GIF
// (.gif)", given "as a fully qualified URL … or as a Base64-encoded data
// URL" (platform.openai.com/docs/guides/images-vision).
var imageURL = regexp.MustCompile(`^data:image/(png|jpeg|webp|gif);base64,([A-Za-z0-9+/]+=*)$`)

// checkImages rejects images in a message that is not the user's, and
// data URLs that are not a base64 image in a supported format.
func checkImages(where, role string, images []string) *statusError {
	for _, u := range images {
		if role != "user" {
			return invalid(where, "", fmt.Sprintf("Invalid '%s': Image URLs are only allowed for messages with role 'user', but this message with role '%s' contains an image URL.", where, role))
		}
		if strings.HasPrefix(u, "https://") {
			continue
		}
		m := imageURL.FindStringSubmatch(u)
		if m == nil {
			return invalid(where, "invalid_image_format", "Invalid image URL: expected a base64-encoded data URL of a PNG, JPEG, WEBP or GIF image.")
		}
		if _, err := base64.StdEncoding.DecodeString(m[2]); err != nil {
			return invalid(where, "invalid_image", "Invalid image data: "+err.Error())
		}
	}
	return nil
}

// validate applies the real API's checks to a decoded request.
func validate(req Request, w wireRequest) *statusError {
	if req.Model == "" {
		return invalid("model", "", "you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role))
		}
	}
	if err := checkToolMessages(req.Messages); err != nil {
		return err
	}
	tools := map[string]bool{}
	for i, t := range req.Tools {
		if !namePattern.MatchString(t.Name) {
			return invalid(fmt.Sprintf("tools[%d].function.name", i), "invalid_value",
				fmt.Sprintf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i))
		}
		tools[t.Name] = true
		if t.Strict {
			if msg := checkStrict(t.Parameters); msg != "" {
				return invalid(fmt.Sprintf("tools[%d].function.parameters", i), "invalid_function_parameters",
					fmt.Sprintf("Invalid schema for function '%s': %s", t.Name, msg))
			}
		}
	}
	if req.ToolChoice != "" {
		if len(req.Tools) == 0 {
			return invalid("tool_choice", "", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
		}
		switch req.ToolChoice {
		case "auto", "required", "none":
		default:
			if !tools[req.ToolChoice] {
				return invalid("tool_choice", "", fmt.Sprintf("Invalid value for 'tool_choice': no function named '%s' was specified in the 'tools' parameter.", req.ToolChoice))
			}
		}
	}
	if req.ParallelToolCalls != nil && len(req.Tools) == 0 {
		return invalid("parallel_tool_calls", "", "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.")
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text":
		case "json_object":
			if !lowerContains(req.Messages, "json") {
				return invalid("messages", "", "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.")
			}
		case "json_schema":
			if w.ResponseFormat.JSONSchema == nil {
				return invalid("response_format.json_schema", "", "Missing required parameter: 'response_format.json_schema'.")
			}
			if !namePattern.MatchString(f.Name) {
				return invalid("response_format.json_schema.name", "invalid_value",
					"Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
			}
			if len(f.Schema) == 0 || string(f.Schema) == "null" {
				return invalid("response_format.json_schema.schema", "", "Missing required parameter: 'response_format.json_schema.schema'.")
			}
			if f.Strict {
				if msg := checkStrict(f.Schema); msg != "" {
					return invalid("response_format", "invalid_json_schema",
						fmt.Sprintf("Invalid schema for response_format '%s': %s", f.Name, msg))
				}
			}
		default:
			return invalid("response_format.type", "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'json_object', 'json_schema', and 'text'.", f.Type))
		}
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return invalid("temperature", "decimal_above_max_value", fmt.Sprintf("Invalid 'temperature': decimal out of range. Expected a value between 0 and 2, but got %g instead.", *t))
	}
	if req.MaxTokensField != "" && req.MaxTokens < 1 {
		return invalid(req.MaxTokensField, "integer_below_min_value",
			fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", req.MaxTokensField, req.MaxTokens))
	}
	return nil
}

// checkToolMessages checks that every tool message answers a call of the
// assistant message before it and that every call is answered right after
// the assistant message that makes it.
func checkToolMessages(msgs []Message) *statusError {
	pending := map[string]bool{}
	var open []string // pending ids in call order, for the message
	unanswered := func() *statusError {
		var ids []string
		for _, id := range open {
			if pending[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		return invalid("messages", "", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(ids, ", "))
	}
	for i, m := range msgs {
		if m.Role == "tool" {
			if !pending[m.ToolCallID] {
				return invalid(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			delete(pending, m.ToolCallID)
			continue
		}
		if err := unanswered(); err != nil {
			return err
		}
		clear(pending)
		open = open[:0]
		if m.Role == "assistant" {
			for _, c := range m.ToolCalls {
				pending[c.ID] = true
				open = append(open, c.ID)
			}
		}
	}
	return unanswered()
}
