package openaitest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// The wire shapes of a Responses API request (POST /v1/responses), from
// OpenAI's API reference, "Create a model response":
// https://platform.openai.com/docs/api-reference/responses/create
type (
	wireResponsesRequest struct {
		Model              string          `json:"model"`
		Input              json.RawMessage `json:"input"`
		Instructions       string          `json:"instructions"`
		Tools              []wireFlatTool  `json:"tools"`
		ToolChoice         json.RawMessage `json:"tool_choice"`
		ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
		Text               *wireTextConfig `json:"text"`
		MaxOutputTokens    *int            `json:"max_output_tokens"`
		Temperature        *float64        `json:"temperature"`
		TopP               *float64        `json:"top_p"`
		Reasoning          *wireReasoning  `json:"reasoning"`
		Store              *bool           `json:"store"`
		Include            []string        `json:"include"`
		PreviousResponseID string          `json:"previous_response_id"`
		Stream             bool            `json:"stream"`
	}
	// wireFlatTool is a Responses function tool: name, parameters and
	// strict sit next to type, not under "function".
	wireFlatTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	wireTextConfig struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"format"`
	}
	wireReasoning struct {
		Effort string `json:"effort"`
	}
	// wireItem is any input item: a message (type "message" or absent,
	// with role), function_call, function_call_output or reasoning.
	wireItem struct {
		Type             string          `json:"type"`
		ID               string          `json:"id"`
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		CallID           string          `json:"call_id"`
		Name             string          `json:"name"`
		Arguments        string          `json:"arguments"`
		Output           json.RawMessage `json:"output"`
		EncryptedContent *string         `json:"encrypted_content"`
		Phase            string          `json:"phase"`
	}
)

// decodeResponses decodes and checks a Responses request into the same
// Request a chat completion gives, so that one Script answers both.
func (s *Server) decodeResponses(body []byte) (Request, *statusError) {
	var w wireResponsesRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, invalid("", "", "We could not parse the JSON body of your request. "+err.Error())
	}
	req := Request{API: APIResponses, Model: w.Model, ParallelToolCalls: w.ParallelToolCalls, Temperature: w.Temperature, TopP: w.TopP,
		Store: w.Store, Include: w.Include, PreviousResponseID: w.PreviousResponseID}
	if w.Reasoning != nil {
		req.ReasoningEffort = w.Reasoning.Effort
	}
	if w.MaxOutputTokens != nil {
		req.MaxTokens, req.MaxTokensField = *w.MaxOutputTokens, "max_output_tokens"
	}
	for i, t := range w.Tools {
		if t.Type != "function" {
			return req, invalid(fmt.Sprintf("tools[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function', 'file_search', 'web_search', 'computer_use_preview', 'mcp', 'code_interpreter', 'image_generation', 'local_shell', 'shell' and 'custom'.", t.Type))
		}
		// strict defaults to true on the Responses API (API reference,
		// function tool: "strict … Defaults to true").
		strict := t.Strict == nil || *t.Strict
		req.Tools = append(req.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: strict})
	}
	if len(w.ToolChoice) > 0 && string(w.ToolChoice) != "null" {
		var str string
		if json.Unmarshal(w.ToolChoice, &str) == nil {
			req.ToolChoice = str
		} else {
			var f struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if err := json.Unmarshal(w.ToolChoice, &f); err != nil || f.Type != "function" || f.Name == "" {
				return req, invalid("tool_choice", "", "Invalid value for 'tool_choice'.")
			}
			req.ToolChoice = f.Name
		}
	}
	if w.Text != nil && w.Text.Format != nil {
		f := w.Text.Format
		req.ResponseFormat = &ResponseFormat{Type: f.Type, Name: f.Name, Schema: f.Schema, Strict: f.Strict}
	}
	if w.Instructions != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Content: w.Instructions})
	}
	if err := s.decodeInput(&req, w.Input); err != nil {
		return req, err
	}
	req.Replay = s.replay(w.Input)
	req.Stream = w.Stream
	return req, s.validateResponses(req)
}

// decodeInput reads the input items into req's messages: function calls
// join the assistant message before them, function_call_output items
// become tool messages, and reasoning items are checked and counted.
func (s *Server) decodeInput(req *Request, raw json.RawMessage) *statusError {
	if len(raw) == 0 || string(raw) == "null" {
		return invalid("input", "", "Missing required parameter: 'input'.")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		req.Messages = append(req.Messages, Message{Role: "user", Content: text})
		return nil
	}
	var items []wireItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return invalid("input", "", "Invalid type for 'input': expected a string or an array of input items.")
	}
	calls := map[string]bool{}    // call ids of function_call items so far
	answered := map[string]bool{} // call ids with an output
	var callOrder []string
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			switch it.Role {
			case "system", "developer", "user", "assistant":
			default:
				return invalid(fmt.Sprintf("input[%d].role", i), "invalid_value",
					fmt.Sprintf("Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", it.Role))
			}
			content, images, err := contentParts(it.Content)
			if err != nil {
				return invalid(fmt.Sprintf("input[%d].content", i), "", fmt.Sprintf("Invalid type for 'input[%d].content': %v", i, err))
			}
			if e := checkImages(fmt.Sprintf("input[%d]", i), it.Role, images); e != nil {
				return e
			}
			req.Messages = append(req.Messages, Message{Role: it.Role, Content: content, Images: images})
		case "function_call":
			if it.CallID == "" {
				return invalid(fmt.Sprintf("input[%d].call_id", i), "", fmt.Sprintf("Missing required parameter: 'input[%d].call_id'.", i))
			}
			// A call joins the assistant message right before it (the
			// text of the same turn, or the calls made with it).
			if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != "assistant" {
				req.Messages = append(req.Messages, Message{Role: "assistant"})
			}
			last := &req.Messages[len(req.Messages)-1]
			last.ToolCalls = append(last.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
			calls[it.CallID] = true
			callOrder = append(callOrder, it.CallID)
		case "function_call_output":
			// "No tool call found for function call output with call_id
			// …" is the API's answer to an output without its call
			// (400, param "input": quoted in continuedev/continue#10092
			// and vercel/ai#8216).
			if !calls[it.CallID] {
				return invalid("input", "", fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID))
			}
			answered[it.CallID] = true
			out, err := contentText(it.Output)
			if err != nil {
				return invalid(fmt.Sprintf("input[%d].output", i), "", fmt.Sprintf("Invalid type for 'input[%d].output': %v", i, err))
			}
			req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: it.CallID, Content: out})
		case "reasoning":
			if err := s.checkReasoning(req, items, i); err != nil {
				return err
			}
			req.ReasoningItems++
		default:
			return invalid(fmt.Sprintf("input[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'.", it.Type))
		}
	}
	// A call without its output: 400 "No tool output found for function
	// call …", param "input" (quoted in router-for-me/CLIProxyAPI#2368
	// and openai/codex#620).
	for _, id := range callOrder {
		if !answered[id] {
			return invalid("input", "", fmt.Sprintf("No tool output found for function call %s.", id))
		}
	}
	return nil
}

// checkReasoning applies the API's rules to the reasoning item
// items[i] of a request that keeps nothing on the server:
//   - without its encrypted_content, the item refers to stored state,
//     which store:false never kept: 404 "Item with id 'rs_…' not found.
//     Items are not persisted when `store` is set to false." (the error
//     quoted in anomalyco/opencode#2480 and github/copilot-sdk#615);
//   - its encrypted_content must be one this server issued (API
//     reference, include: "reasoning.encrypted_content … enables
//     reasoning items to be used in multi-turn conversations when using
//     the Responses API statelessly"); another's is a 400
//     invalid_encrypted_content (openai/codex#8145);
//   - it must be followed by the item it led to: "Item 'rs_…' of type
//     'reasoning' was provided without its required following item."
//     (community.openai.com, "How to use reasoning.encrypted_content with
//     store=False").
func (s *Server) checkReasoning(req *Request, items []wireItem, i int) *statusError {
	it := items[i]
	if it.EncryptedContent == nil || *it.EncryptedContent == "" {
		if req.Store == nil || *req.Store {
			return invalid("input", "", fmt.Sprintf("Item with id '%s' not found.", it.ID))
		}
		return &statusError{status: http.StatusNotFound, APIError: APIError{Type: "invalid_request_error", Param: "input",
			Message: fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID)}}
	}
	if c := *it.EncryptedContent; !s.verify(it.ID, c) {
		// The body quoted in openai/codex#8145: the content abridged,
		// param null.
		if len(c) > 8 {
			c = c[:4] + "..." + c[len(c)-4:]
		}
		return invalid("", "invalid_encrypted_content", fmt.Sprintf("The encrypted content %s could not be verified.", c))
	}
	if i+1 >= len(items) || items[i+1].Type == "reasoning" || (items[i+1].Type != "function_call" && items[i+1].Role != "assistant") {
		return invalid("input", "", fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID))
	}
	return nil
}

// mint returns the encrypted content of reasoning item id: an HMAC under
// the server's secret, so that only this server's items verify.
func (s *Server) mint(id string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(id))
	return "gAAAAA" + base64.RawURLEncoding.EncodeToString(append([]byte(id+"."), m.Sum(nil)...))
}

func (s *Server) verify(id, content string) bool {
	return hmac.Equal([]byte(s.mint(id)), []byte(content))
}

// validateResponses applies the Responses API's own checks.
func (s *Server) validateResponses(req Request) *statusError {
	if req.Model == "" {
		return invalid("model", "", "Missing required parameter: 'model'.")
	}
	if req.PreviousResponseID != "" {
		// The fake stores no response, as with store:false.
		return invalid("previous_response_id", "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID))
	}
	for _, inc := range req.Include {
		switch inc {
		case "reasoning.encrypted_content", "message.output_text.logprobs", "file_search_call.results", "web_search_call.results",
			"message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs":
		default:
			return invalid("include", "invalid_value", fmt.Sprintf("Invalid value: '%s'.", inc))
		}
	}
	tools := map[string]bool{}
	for i, t := range req.Tools {
		if !namePattern.MatchString(t.Name) {
			return invalid(fmt.Sprintf("tools[%d].name", i), "invalid_value",
				fmt.Sprintf("Invalid 'tools[%d].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i))
		}
		tools[t.Name] = true
		if t.Strict {
			if msg := checkStrict(t.Parameters); msg != "" {
				return invalid(fmt.Sprintf("tools[%d].parameters", i), "invalid_function_parameters", fmt.Sprintf("Invalid schema for function '%s': %s", t.Name, msg))
			}
		}
	}
	if req.ToolChoice != "" {
		switch req.ToolChoice {
		case "auto", "required", "none":
		default:
			if !tools[req.ToolChoice] {
				return invalid("tool_choice", "", fmt.Sprintf("Tool choice 'function' not found in 'tools' parameter: %s", req.ToolChoice))
			}
		}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text":
		case "json_object":
			if !lowerContains(req.Messages, "json") {
				return invalid("text.format", "", "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.")
			}
		case "json_schema":
			if !namePattern.MatchString(f.Name) {
				return invalid("text.format.name", "invalid_value", "Invalid 'text.format.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
			}
			if len(f.Schema) == 0 || string(f.Schema) == "null" {
				return invalid("text.format.schema", "", "Missing required parameter: 'text.format.schema'.")
			}
			if f.Strict {
				if msg := checkStrict(f.Schema); msg != "" {
					return invalid("text.format.schema", "invalid_json_schema", fmt.Sprintf("Invalid schema for response_format '%s': %s", f.Name, msg))
				}
			}
		default:
			return invalid("text.format.type", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type))
		}
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return invalid("temperature", "decimal_above_max_value", fmt.Sprintf("Invalid 'temperature': decimal out of range. Expected a value between 0 and 2, but got %g instead.", *t))
	}
	// max_output_tokens has a minimum of 16 (API reference).
	if req.MaxTokensField != "" && req.MaxTokens < 16 {
		return invalid("max_output_tokens", "integer_below_min_value",
			fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", req.MaxTokens))
	}
	return nil
}

// The wire shapes of a response.
type (
	wireResponse struct {
		ID                string             `json:"id"`
		Object            string             `json:"object"`
		CreatedAt         int64              `json:"created_at"`
		Status            string             `json:"status"`
		Error             any                `json:"error"`
		IncompleteDetails *wireIncomplete    `json:"incomplete_details"`
		Model             string             `json:"model"`
		Output            []any              `json:"output"`
		ParallelToolCalls bool               `json:"parallel_tool_calls"`
		Store             bool               `json:"store"`
		Usage             *wireResponseUsage `json:"usage,omitempty"`
	}
	wireIncomplete struct {
		Reason string `json:"reason"`
	}
	wireResponseUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	wireReasoningItem struct {
		ID               string `json:"id"`
		Type             string `json:"type"`
		Summary          []any  `json:"summary"`
		EncryptedContent string `json:"encrypted_content,omitempty"`
	}
	wireOutputMessage struct {
		ID      string           `json:"id"`
		Type    string           `json:"type"`
		Status  string           `json:"status"`
		Role    string           `json:"role"`
		Content []wireOutputText `json:"content"`
		Phase   string           `json:"phase,omitempty"`
	}
	wireOutputText struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	}
	wireFunctionCall struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
)

// writeResponse answers a Responses request with reply: its Output, or
// by default a reasoning item first when the model reasons (its encrypted
// content only when the request includes it), then the message, then the
// function calls; "incomplete" with reason max_output_tokens when the
// reply is cut off. Each message carries its phase: "commentary" next to
// function calls, else "final_answer" (openai/openai-openapi openapi.yaml,
// MessagePhase: "Labels an assistant message as intermediate commentary
// (commentary) or the final answer (final_answer)", and OutputMessage.phase).
// Every item is remembered, for replay (see Request.Replay).
func (s *Server) writeResponse(w http.ResponseWriter, req Request, reply Reply, u Usage, cut bool, sendUsage bool) {
	s.writeJSON(w, s.response(req, reply, u, cut, sendUsage), u)
}

// response is the response writeResponse sends (and a stream's last
// event carries), its output items recorded as issued.
func (s *Server) response(req Request, reply Reply, u Usage, cut bool, sendUsage bool) wireResponse {
	out := wireResponse{
		ID:        fmt.Sprintf("resp_openaitest_%d", req.Call),
		Object:    "response",
		CreatedAt: time.Now().Unix(),
		Status:    "completed",
		Model:     req.Model,
		Output:    []any{},
		Store:     req.Store == nil || *req.Store,
	}
	if req.ParallelToolCalls != nil {
		out.ParallelToolCalls = *req.ParallelToolCalls
	}
	status := "completed"
	if cut {
		out.Status, status = "incomplete", "incomplete"
		out.IncompleteDetails = &wireIncomplete{Reason: "max_output_tokens"}
	}
	items := reply.Output
	if len(items) == 0 || cut {
		items = defaultOutput(reply, u, cut)
	}
	issued := make([]issuedItem, len(items))
	for i, it := range items {
		is := issuedItem{resp: out.ID, index: i, n: len(items), Item: it}
		switch it.Type {
		case "reasoning":
			is.id = fmt.Sprintf("rs_openaitest_%d_%d", req.Call, i)
			item := wireReasoningItem{ID: is.id, Type: "reasoning", Summary: []any{}}
			for _, inc := range req.Include {
				if inc == "reasoning.encrypted_content" {
					item.EncryptedContent = s.mint(is.id)
				}
			}
			out.Output = append(out.Output, item)
		case "message":
			is.id = fmt.Sprintf("msg_openaitest_%d_%d", req.Call, i)
			out.Output = append(out.Output, wireOutputMessage{ID: is.id, Type: "message", Status: status, Role: "assistant", Phase: it.Phase,
				Content: []wireOutputText{{Type: "output_text", Text: it.Text, Annotations: []any{}}}})
		case "function_call":
			is.id = fmt.Sprintf("fc_openaitest_%d_%d", req.Call, i)
			out.Output = append(out.Output, wireFunctionCall{ID: is.id, Type: "function_call", Status: status,
				CallID: it.Call.ID, Name: it.Call.Name, Arguments: it.Call.Arguments})
		}
		issued[i] = is
	}
	s.mu.Lock()
	for _, is := range issued {
		s.issued[is.id] = is
		if is.Type == "function_call" {
			s.issuedCalls[is.Call.ID] = is.id
		}
	}
	s.mu.Unlock()
	if sendUsage {
		wu := &wireResponseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
		wu.InputTokensDetails.CachedTokens = u.CachedTokens
		wu.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
		out.Usage = wu
	}
	return out
}

// defaultOutput is the output of a reply without Output of its own.
func defaultOutput(reply Reply, u Usage, cut bool) []Item {
	var items []Item
	if u.ReasoningTokens > 0 {
		items = append(items, Reasoning())
	}
	if reply.Content != "" || len(reply.ToolCalls) == 0 && !cut {
		phase := "final_answer"
		if len(reply.ToolCalls) > 0 {
			phase = "commentary"
		}
		items = append(items, OutputText(reply.Content, phase))
	}
	for _, c := range reply.ToolCalls {
		items = append(items, FunctionCall(c))
	}
	return items
}

// issuedItem is an output item the server sent: the index-th of the n
// items of response resp.
type issuedItem struct {
	Item
	id       string
	resp     string
	index, n int
}

// withOutput settles a reply's tool call ids ("call_<call>_<index>" where
// the script left them empty) and, for a reply with Output, its Content
// and ToolCalls.
func withOutput(req Request, r Reply) Reply {
	if len(r.Output) == 0 {
		r.ToolCalls = slices.Clone(r.ToolCalls)
		for i := range r.ToolCalls {
			if r.ToolCalls[i].ID == "" {
				r.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", req.Call, i)
			}
		}
		return r
	}
	r.Output = slices.Clone(r.Output)
	r.Content, r.ToolCalls = "", nil
	for i := range r.Output {
		it := &r.Output[i]
		switch it.Type {
		case "message":
			r.Content += it.Text
		case "function_call":
			if it.Call.ID == "" {
				it.Call.ID = fmt.Sprintf("call_%d_%d", req.Call, len(r.ToolCalls))
			}
			r.ToolCalls = append(r.ToolCalls, it.Call)
		}
	}
	return r
}

// replay lists where the input's assistant turns differ from the output
// items this server issued, which OpenAI asks clients to send back as
// they came: an assistant message without its phase ("preserve and
// resend phase on all assistant messages — dropping it can degrade
// performance": MessagePhase in openai/openai-openapi openapi.yaml, which
// EasyInputMessage.phase and OutputMessage.phase refer to), an issued item
// without its id or changed, and a response's items out of their order,
// split by other items, or left out in part. The real API answers such a
// request anyway, worse; the fake answers it too and records the list in
// Request.Replay.
func (s *Server) replay(raw json.RawMessage) []string {
	var items []wireItem
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var problems []string
	say := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var open issuedItem // the response being replayed, open.index the last item seen
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		var (
			is issuedItem
			ok bool
		)
		switch typ {
		case "message":
			if it.Role != "assistant" {
				break
			}
			if it.Phase == "" {
				say("input[%d]: an assistant message without its phase", i)
			}
			if it.ID != "" {
				is, ok = s.issued[it.ID]
			}
			if ok {
				text, _ := contentText(it.Content)
				if it.Phase != is.Phase || text != is.Text {
					say("input[%d]: message %s came back changed (phase %q, was %q)", i, it.ID, it.Phase, is.Phase)
				}
			}
		case "function_call":
			id, known := s.issuedCalls[it.CallID]
			if known && it.ID != id {
				say("input[%d]: function_call %s came back without its id %s", i, it.CallID, id)
			}
			if is, ok = s.issued[id]; ok && (it.Name != is.Call.Name || it.Arguments != is.Call.Arguments) {
				say("input[%d]: function_call %s came back changed", i, it.CallID)
			}
		case "reasoning":
			is, ok = s.issued[it.ID]
		}
		switch {
		case ok && is.resp == open.resp && is.index != open.index+1:
			say("input[%d]: item %d of %s out of order (after item %d)", i, is.index, is.resp, open.index)
		case ok && is.resp != open.resp:
			if open.resp != "" && open.index < open.n-1 {
				say("input[%d]: %s's output is cut short at item %d of %d", i, open.resp, open.index+1, open.n)
			}
			if is.index != 0 {
				say("input[%d]: %s's output starts at item %d", i, is.resp, is.index)
			}
		case !ok && open.resp != "" && open.index < open.n-1:
			say("input[%d]: a %s item splits %s's output after item %d of %d", i, typ, open.resp, open.index+1, open.n)
			open = issuedItem{}
		}
		if ok {
			open = is
		}
	}
	if open.resp != "" && open.index < open.n-1 {
		say("%s's output is cut short at item %d of %d", open.resp, open.index+1, open.n)
	}
	return problems
}
