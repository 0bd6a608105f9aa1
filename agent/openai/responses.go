package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
)

// The Responses API's input items, as OpenAI's API reference ("Create a
// model response", input) describes them. go-openai types the input as
// any, so these are ours.
type (
	inputMessage struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content string `json:"content"`
		// Phase labels an assistant message "commentary" or
		// "final_answer" (EasyInputMessage.phase in openai/openai-openapi
		// openapi.yaml: "preserve and resend phase on all assistant
		// messages").
		Phase string `json:"phase,omitempty"`
	}
	// inputParts is a message whose content is a list of parts.
	inputParts struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	inputPart struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL string `json:"image_url,omitempty"`
		Detail   string `json:"detail,omitempty"`
	}
	functionCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	functionCallOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	// outputItem is one item of a response's output, as far as the
	// client reads it.
	outputItem struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	}
)

// replay is the State of an assistant message on the Responses API: the
// output items of the reply it records, in their order and as they came
// (ids, phase, encrypted reasoning), to be sent back unchanged. With
// store:false nothing is kept on OpenAI's side, and OpenAI asks for the
// phase of every assistant message to come back (MessagePhase in
// openai/openai-openapi openapi.yaml: "dropping it can degrade
// performance"). A State that is a bare array is an earlier version's:
// the reply's reasoning items only.
type replay struct {
	Output []json.RawMessage `json:"output"`
}

// input turns the conversation into Responses input items. An assistant
// message with a State sends its reply's output items back as they came,
// then any call the engine added (a tools-protocol reply that came as
// text); one without (an earlier answer from the chat history, or a
// reply on Chat Completions) is rebuilt with its phase. Tool results are
// function_call_output items.
func input(msgs []agent.Message) []any {
	var items []any
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleAssistant:
			items = append(items, assistantItems(m)...)
		case agent.RoleTool:
			items = append(items, functionCallOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: m.Content})
		case agent.RoleUser:
			if len(m.Images) == 0 {
				items = append(items, inputMessage{Type: "message", Role: "user", Content: m.Content})
				continue
			}
			// Images are input_image parts with a base64 data URL
			// (platform.openai.com/docs/guides/images-vision).
			parts := []any{inputPart{Type: "input_text", Text: m.Content}}
			for _, im := range m.Images {
				parts = append(parts, inputPart{Type: "input_image", ImageURL: dataURL(im), Detail: "auto"})
			}
			items = append(items, inputParts{Type: "message", Role: "user", Content: parts})
		default:
			items = append(items, inputMessage{Type: "message", Role: string(m.Role), Content: m.Content})
		}
	}
	return items
}

// assistantItems are the input items of an assistant message.
func assistantItems(m agent.Message) []any {
	var items []any
	var r replay
	if len(m.State) > 0 && m.State[0] == '{' && json.Unmarshal(m.State, &r) == nil && len(r.Output) > 0 {
		sent := map[string]bool{}
		for _, raw := range r.Output {
			var it outputItem
			if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" {
				sent[it.CallID] = true
			}
			items = append(items, raw)
		}
		for _, tc := range m.ToolCalls {
			if !sent[tc.ID] {
				items = append(items, functionCall{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
		}
		return items
	}
	var state []json.RawMessage
	if len(m.State) > 0 && json.Unmarshal(m.State, &state) == nil {
		for _, it := range state {
			items = append(items, it)
		}
	}
	phase := "final_answer"
	if len(m.ToolCalls) > 0 {
		phase = "commentary"
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		items = append(items, inputMessage{Type: "message", Role: "assistant", Content: m.Content, Phase: phase})
	}
	for _, tc := range m.ToolCalls {
		items = append(items, functionCall{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return items
}

// responsesRequest maps req onto go-openai's Responses request. The API
// is used statelessly: store is false, the whole conversation is sent
// each call, and each reply's output items, as they came (ids, the phase
// of each message, their order, the encrypted reasoning), come back in
// Response.State, which the engine keeps in its transcript and which is
// sent again, unchanged, in place of the assistant message it belongs to
// (see replay); so a run resumed after a restart continues with nothing
// held on OpenAI's side.
func (c *Client) responsesRequest(req agent.Request, p plan) goopenai.CreateResponseRequest {
	store := false
	out := goopenai.CreateResponseRequest{Model: c.model, Input: input(req.Messages), Store: &store, MaxOutputTokens: req.MaxTokens}
	if p.effort != "" {
		out.Reasoning = &goopenai.ResponseReasoning{Effort: p.effort}
		if p.effort != "none" {
			// Stateless use: the reasoning comes back encrypted, to be
			// sent again with the next call (API reference, include:
			// "reasoning.encrypted_content … when using the Responses API
			// statelessly (like when the store parameter is set to
			// false)").
			out.Include = []goopenai.ResponseInclude{goopenai.ResponseIncludeReasoningEncryptedContent}
		}
	}
	if p.sampling() {
		t := req.Temperature
		out.Temperature = &t
	}
	for _, t := range req.Tools {
		params, strict := toolSchema(t, p.schema)
		// strict is always sent: on the Responses API it defaults to true
		// (API reference, function tool), and go-openai's
		// NewResponseFunctionTool leaves a false out.
		tool := goopenai.NewResponseFunctionTool(goopenai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params})
		tool.Parameters["strict"] = strict
		out.Tools = append(out.Tools, tool)
	}
	out.ToolChoice, out.ParallelToolCalls = c.toolOptions(req, func(name string) any {
		return map[string]string{"type": "function", "name": name}
	})
	switch p.format {
	case agent.FormatJSONSchema:
		schema, strict := formatSchema(req.Format, p.schema)
		out.Text = &goopenai.ResponseTextConfig{Format: &goopenai.ResponseTextFormat{
			Type: "json_schema", Name: formatName(req.Format), Schema: schema, Strict: strict,
		}}
	case agent.FormatJSONObject:
		out.Text = &goopenai.ResponseTextConfig{Format: &goopenai.ResponseTextFormat{Type: "json_object"}}
	}
	return out
}

// completeResponses makes one call on the Responses API.
func (c *Client) completeResponses(ctx context.Context, req agent.Request, p plan) (agent.Response, error) {
	rreq := c.responsesRequest(req, p)
	var resp goopenai.CreateResponseResponse
	err := c.send(ctx, bodyEdit{drop: p.dropped}, func(ctx context.Context) (http.Header, error) {
		var err error
		resp, err = c.api.CreateResponse(ctx, rreq)
		return resp.Header(), err
	})
	if err != nil {
		return agent.Response{}, c.responsesError(err)
	}
	return c.responsesResponse(req, p.format, resp)
}

// responsesError words a failed Responses call: a server without the
// API gets its own message.
func (c *Client) responsesError(err error) error {
	var e *apiError
	if errors.As(err, &e) && routeMissing(e) {
		// With OPENAI_API=auto the client falls back to Chat Completions
		// (adapt); this message is for OPENAI_API=responses.
		return &agent.Error{Code: agent.ErrInvalid, Err: e,
			Message: fmt.Sprintf("the model API at %s has no Responses API (HTTP 404 for /responses): set OPENAI_API=chat (or auto)", c.host)}
	}
	return err
}

// responsesResponse maps a response onto the agent's.
func (c *Client) responsesResponse(req agent.Request, format agent.FormatKind, resp goopenai.CreateResponseResponse) (agent.Response, error) {
	if resp.Status == goopenai.ResponseStatusFailed {
		msg := "the model API could not produce a reply"
		if resp.Error != nil && resp.Error.Message != "" {
			msg += ": " + truncate(c.redact(resp.Error.Message), 300)
		}
		return agent.Response{}, &agent.Error{Code: agent.ErrServer, Message: msg}
	}
	out := agent.Response{Format: format, FinishReason: "stop"}
	if out.Format == "" {
		out.Format = agent.FormatText
	}
	var text, refusal strings.Builder
	var state replay
	for _, raw := range resp.Output {
		b, err := json.Marshal(raw)
		if err != nil {
			continue
		}
		var it outputItem
		if json.Unmarshal(b, &it) != nil {
			continue
		}
		state.Output = append(state.Output, b)
		switch it.Type {
		case "message":
			for _, part := range it.Content {
				switch part.Type {
				case "output_text":
					text.WriteString(part.Text)
				case "refusal":
					refusal.WriteString(part.Refusal)
				}
			}
		case "function_call":
			out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		}
	}
	out.Content = text.String()
	if out.Content == "" {
		// A structured-outputs refusal: the agent treats it as a reply
		// that does not parse, and says so.
		out.Content = refusal.String()
	}
	if len(state.Output) > 0 {
		out.State, _ = json.Marshal(state)
	}
	switch {
	case resp.Status == goopenai.ResponseStatusIncomplete && resp.IncompleteDetails != nil && resp.IncompleteDetails.Reason == "max_output_tokens":
		out.FinishReason = "length"
	case resp.Status == goopenai.ResponseStatusIncomplete && resp.IncompleteDetails != nil:
		out.FinishReason = resp.IncompleteDetails.Reason
	case len(out.ToolCalls) > 0:
		out.FinishReason = "tool_calls"
	}
	if u := resp.Usage; u != nil {
		out.Usage = agent.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, Calls: 1}
		if u.InputTokensDetails != nil {
			out.Usage.CachedTokens = u.InputTokensDetails.CachedTokens
		}
		if u.OutputTokensDetails != nil {
			out.Usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
		}
	}
	if out.Usage.PromptTokens == 0 && out.Usage.CompletionTokens == 0 {
		out.Usage = EstimateUsage(req, out)
	}
	return out, nil
}
