package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// Streaming. A request with "stream": true is answered with server-sent
// events, as the real API streams:
//
//   - Chat Completions (API reference, "The chat completion chunk
//     object"; go-openai chat_stream.go ChatCompletionStreamResponse):
//     data-only events, each a chat.completion.chunk whose choice has a
//     delta: the role first, then content pieces, then each tool call
//     (index, id, type and function name in its first delta, then its
//     arguments in pieces), then a chunk with finish_reason; with
//     stream_options.include_usage, one more chunk with empty choices
//     and the usage; then "data: [DONE]".
//   - Responses (API reference, "Streaming events"; go-openai
//     response_stream.go): "event: <type>" and "data: {…}" pairs with a
//     sequence_number: response.created, response.in_progress, then per
//     output item response.output_item.added, for a message
//     response.content_part.added, response.output_text.delta pieces,
//     response.output_text.done and response.content_part.done, for a
//     function call response.function_call_arguments.delta pieces and
//     .done, then response.output_item.done with the whole item; last
//     response.completed (or response.incomplete) with the whole
//     response. No [DONE]: the stream ends there.
//
// A piece is one "token" of about four characters (EstimateUsage's
// rate), sent at the server's token rate (WithTokenRate) after its
// latency; with no rate set, pieces are sent at once, and a long text
// in at most maxInstantPieces of them. A Reply made with FailAfter breaks the
// stream with an error event after that many characters: Chat
// Completions' `data: {"error": {…}}` (what go-openai's stream reader
// turns into an *APIError), the Responses API's "error" event (code,
// message, param).

// WithTokenRate streams answers at n tokens a second (a piece of about
// four characters each 1/n s); 0 sends them at once.
func WithTokenRate(n float64) Option { return func(s *Server) { s.tokenRate = n } }

// SetTokenRate changes the streaming rate (see WithTokenRate).
func (s *Server) SetTokenRate(n float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenRate = n
}

// FailAfter returns r streamed up to n characters of its content and
// tool call arguments, then broken by a server error event (the
// completion is not counted as answered). Unstreamed, r is answered
// whole.
func (r Reply) FailAfter(n int) Reply {
	r.StreamFailAfter = n
	r.StreamError = &APIError{Message: "The server had an error while processing your request. Sorry about that!", Type: "server_error", Code: "server_error"}
	return r
}

// pieceLen is the characters of one streamed token.
const pieceLen = 4

// maxInstantPieces bounds the pieces of one text streamed at no rate:
// a runaway reply (a megabyte) then costs a few thousand events, not a
// quarter of a million.
const maxInstantPieces = 2048

// pieces cuts s into tokens of about size bytes, never inside a UTF-8
// sequence.
func pieces(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// streamer writes server-sent events at the token rate and stops at the
// reply's failure point.
type streamer struct {
	w     http.ResponseWriter
	r     *http.Request
	f     http.Flusher
	every time.Duration
	// left is how many characters may still be sent before the failure
	// (-1: no failure).
	left   int
	failed bool
	seq    int
}

func (s *Server) newStreamer(w http.ResponseWriter, r *http.Request, reply Reply) *streamer {
	s.mu.Lock()
	rate := s.tokenRate
	s.mu.Unlock()
	st := &streamer{w: w, r: r, left: -1}
	st.f, _ = w.(http.Flusher)
	if rate > 0 {
		st.every = time.Duration(float64(time.Second) / rate)
	}
	if reply.StreamError != nil {
		st.left = reply.StreamFailAfter
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return st
}

// event writes one event (name "" for a data-only one); false when the
// client has gone.
func (st *streamer) event(name string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if name != "" {
		_, _ = fmt.Fprintf(st.w, "event: %s\n", name)
	}
	if _, err := fmt.Fprintf(st.w, "data: %s\n\n", b); err != nil {
		return false
	}
	if st.f != nil {
		st.f.Flush()
	}
	return st.r.Context().Err() == nil
}

// text streams s in pieces through send, waiting the token interval
// before each; false when the stream failed or the client has gone.
func (st *streamer) text(s string, send func(piece string) bool) bool {
	size := pieceLen
	if st.every == 0 {
		size = max(size, len(s)/maxInstantPieces+1)
	}
	for _, p := range pieces(s, size) {
		if st.left >= 0 {
			if st.left < len(p) {
				st.failed = true
				return false
			}
			st.left -= len(p)
		}
		if !sleep(st.r.Context(), st.every) || !send(p) {
			return false
		}
	}
	return true
}

// chunk is a chat.completion.chunk.
type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usageJSON    `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	LogProbs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []chunkToolCall `json:"tool_calls,omitempty"`
}

type chunkToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// writeStream answers a streamed request.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, req Request, reply Reply, u Usage, cut, sendUsage bool) {
	st := s.newStreamer(w, r, reply)
	var ok bool
	if req.API == APIResponses {
		ok = s.streamResponse(st, req, reply, u, cut, sendUsage)
	} else {
		ok = s.streamChat(st, req, reply, u, cut, sendUsage)
	}
	if st.failed {
		e := reply.StreamError
		if req.API == APIResponses {
			st.seq++
			st.event("error", map[string]any{"type": "error", "code": e.Code, "message": e.Message, "param": nil, "sequence_number": st.seq})
		} else {
			st.event("", map[string]any{"error": e})
		}
		return
	}
	if !ok {
		return
	}
	s.count(u)
}

func (s *Server) streamChat(st *streamer, req Request, reply Reply, u Usage, cut, sendUsage bool) bool {
	base := chunk{ID: fmt.Sprintf("chatcmpl-openaitest-%d", req.Call), Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: req.Model}
	send := func(d chunkDelta, finish *string) bool {
		c := base
		c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		return st.event("", c)
	}
	empty := ""
	if !send(chunkDelta{Role: "assistant", Content: &empty}, nil) {
		return false
	}
	if !st.text(reply.Content, func(p string) bool { return send(chunkDelta{Content: &p}, nil) }) {
		return false
	}
	for i, c := range reply.ToolCalls {
		first := chunkToolCall{Index: i, ID: c.ID, Type: "function"}
		first.Function.Name = c.Name
		if !send(chunkDelta{ToolCalls: []chunkToolCall{first}}, nil) {
			return false
		}
		if !st.text(c.Arguments, func(p string) bool {
			tc := chunkToolCall{Index: i}
			tc.Function.Arguments = p
			return send(chunkDelta{ToolCalls: []chunkToolCall{tc}}, nil)
		}) {
			return false
		}
	}
	finish := chatFinish(reply, cut)
	if !send(chunkDelta{}, &finish) {
		return false
	}
	if sendUsage && req.IncludeUsage {
		c := base
		c.Choices = []chunkChoice{}
		c.Usage = chatUsage(u)
		if !st.event("", c) {
			return false
		}
	}
	_, err := fmt.Fprint(st.w, "data: [DONE]\n\n")
	if st.f != nil {
		st.f.Flush()
	}
	return err == nil
}

func (s *Server) streamResponse(st *streamer, req Request, reply Reply, u Usage, cut, sendUsage bool) bool {
	final := s.response(req, reply, u, cut, sendUsage)
	ev := func(typ string, fields map[string]any) bool {
		st.seq++
		fields["type"] = typ
		fields["sequence_number"] = st.seq
		return st.event(typ, fields)
	}
	start := final
	start.Status, start.Output, start.Usage, start.IncompleteDetails = "in_progress", []any{}, nil, nil
	if !ev("response.created", map[string]any{"response": start}) || !ev("response.in_progress", map[string]any{"response": start}) {
		return false
	}
	for i, item := range final.Output {
		switch it := item.(type) {
		case wireReasoningItem:
			if !ev("response.output_item.added", map[string]any{"output_index": i, "item": it}) {
				return false
			}
		case wireOutputMessage:
			added := it
			added.Status, added.Content = "in_progress", []wireOutputText{}
			if !ev("response.output_item.added", map[string]any{"output_index": i, "item": added}) {
				return false
			}
			part := wireOutputText{Type: "output_text", Annotations: []any{}}
			if !ev("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part}) {
				return false
			}
			text := ""
			if len(it.Content) > 0 {
				text = it.Content[0].Text
			}
			if !st.text(text, func(p string) bool {
				return ev("response.output_text.delta", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "delta": p, "logprobs": []any{}})
			}) {
				return false
			}
			part.Text = text
			if !ev("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}}) ||
				!ev("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part}) {
				return false
			}
		case wireFunctionCall:
			added := it
			added.Status, added.Arguments = "in_progress", ""
			if !ev("response.output_item.added", map[string]any{"output_index": i, "item": added}) {
				return false
			}
			if !st.text(it.Arguments, func(p string) bool {
				return ev("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": p})
			}) {
				return false
			}
			if !ev("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": it.Arguments}) {
				return false
			}
		}
		if !ev("response.output_item.done", map[string]any{"output_index": i, "item": item}) {
			return false
		}
	}
	last := "response.completed"
	if final.Status == "incomplete" {
		last = "response.incomplete"
	}
	return ev(last, map[string]any{"response": final})
}
