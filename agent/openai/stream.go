package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
)

// Streaming (agent.Request.Stream). The reply is read as server-sent
// events with go-openai's stream readers (CreateChatCompletionStream,
// CreateResponseStream), each piece handed to the engine as it arrives,
// and assembled into the same agent.Response as the call without
// streaming makes: the same usage (Chat Completions is asked for it
// with stream_options.include_usage; the Responses API sends the whole
// response in its last event), the same state, the same retries. An
// error event in the middle of a stream is a server error: the call is
// made again (retry), and the engine hears Reset first.

// completeChatStream is completeChat, streamed.
func (c *Client) completeChatStream(ctx context.Context, req agent.Request, p plan) (agent.Response, error) {
	creq := c.chatRequest(req, p)
	if !p.dropped["stream_options"] {
		creq.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	}
	edit := c.chatEdit(req, p, &creq)
	var resp goopenai.ChatCompletionResponse
	err := c.send(ctx, edit, func(ctx context.Context) (http.Header, error) {
		req.Stream(agent.Delta{Reset: true})
		var h http.Header
		st, err := c.api.CreateChatCompletionStream(context.WithValue(ctx, headerKey{}, &h), creq)
		if err != nil {
			return h, err
		}
		defer st.Close()
		resp, err = readChatStream(st, req.Stream)
		return st.Header(), err
	})
	if err != nil {
		return agent.Response{}, err
	}
	return c.chatResponse(req, p.format, resp)
}

// readChatStream reads a chat completion stream into the response it
// amounts to, handing each piece to hear.
func readChatStream(st *goopenai.ChatCompletionStream, hear func(agent.Delta)) (goopenai.ChatCompletionResponse, error) {
	var (
		content, refusal strings.Builder
		calls            []goopenai.ToolCall
		args             []strings.Builder
		finish           goopenai.FinishReason
		usage            goopenai.Usage
	)
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return goopenai.ChatCompletionResponse{}, streamError(err)
		}
		if chunk.Usage != nil {
			usage = *chunk.Usage
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		ch := chunk.Choices[0]
		if ch.FinishReason != "" {
			finish = ch.FinishReason
		}
		if d := ch.Delta.Content; d != "" {
			content.WriteString(d)
			hear(agent.Delta{Content: d})
		}
		refusal.WriteString(ch.Delta.Refusal)
		for _, tc := range ch.Delta.ToolCalls {
			i := len(calls) - 1
			if tc.Index != nil {
				i = *tc.Index
			} else if tc.ID != "" || i < 0 {
				i = len(calls)
			}
			for len(calls) <= i {
				calls = append(calls, goopenai.ToolCall{Type: goopenai.ToolTypeFunction})
				args = append(args, strings.Builder{})
			}
			if tc.ID != "" {
				calls[i].ID = tc.ID
			}
			if tc.Function.Name != "" {
				calls[i].Function.Name += tc.Function.Name
			}
			args[i].WriteString(tc.Function.Arguments)
			hear(agent.Delta{Call: i, Name: calls[i].Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	if finish == "" {
		// The stream ended without its last chunk: a connection cut
		// short, not an answer.
		return goopenai.ChatCompletionResponse{}, fmt.Errorf("the stream ended before the reply was complete: %w", io.ErrUnexpectedEOF)
	}
	for i := range calls {
		calls[i].Function.Arguments = args[i].String()
	}
	msg := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: content.String(), Refusal: refusal.String(), ToolCalls: calls}
	return goopenai.ChatCompletionResponse{Choices: []goopenai.ChatCompletionChoice{{Message: msg, FinishReason: finish}}, Usage: usage}, nil
}

// completeResponsesStream is completeResponses, streamed.
func (c *Client) completeResponsesStream(ctx context.Context, req agent.Request, p plan) (agent.Response, error) {
	rreq := c.responsesRequest(req, p)
	var resp goopenai.CreateResponseResponse
	err := c.send(ctx, bodyEdit{drop: p.dropped}, func(ctx context.Context) (http.Header, error) {
		req.Stream(agent.Delta{Reset: true})
		var h http.Header
		st, err := c.api.CreateResponseStream(context.WithValue(ctx, headerKey{}, &h), rreq)
		if err != nil {
			return h, err
		}
		defer st.Close()
		resp, err = readResponseStream(st, req.Stream)
		return st.Header(), err
	})
	if err != nil {
		return agent.Response{}, c.responsesError(err)
	}
	return c.responsesResponse(req, p.format, resp)
}

// readResponseStream reads a Responses stream up to its last event,
// which carries the whole response, handing each piece to hear.
func readResponseStream(st *goopenai.ResponseStream, hear func(agent.Delta)) (goopenai.CreateResponseResponse, error) {
	calls := map[int]int{} // output index → call index
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return goopenai.CreateResponseResponse{}, fmt.Errorf("the stream ended before the response was complete: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return goopenai.CreateResponseResponse{}, streamError(err)
		}
		switch ev.Type {
		case goopenai.ResponseStreamEventOutputItemAdded:
			if ev.Item != nil && ev.Item.Type == "function_call" {
				i := len(calls)
				calls[ev.OutputIndex] = i
				hear(agent.Delta{Call: i, Name: ev.Item.Name})
			}
		case goopenai.ResponseStreamEventOutputTextDelta:
			hear(agent.Delta{Content: ev.Delta})
		case goopenai.ResponseStreamEventFunctionArgumentsDelta:
			if i, ok := calls[ev.OutputIndex]; ok {
				hear(agent.Delta{Call: i, Arguments: ev.Delta})
			}
		case goopenai.ResponseStreamEventCompleted, goopenai.ResponseStreamEventIncomplete, goopenai.ResponseStreamEventFailed:
			if ev.Response == nil {
				return goopenai.CreateResponseResponse{}, fmt.Errorf("the stream's %s event carries no response: %w", ev.Type, io.ErrUnexpectedEOF)
			}
			return *ev.Response, nil
		case goopenai.ResponseStreamEventError:
			return goopenai.CreateResponseResponse{}, &goopenai.APIError{HTTPStatusCode: http.StatusInternalServerError, Type: "server_error", Code: ev.Code, Message: ev.Message}
		}
	}
}

// streamError makes an error event in the middle of a stream (an
// *APIError without an HTTP status: the answer's status was 200) a
// server error, which is retried.
func streamError(err error) error {
	var ae *goopenai.APIError
	if errors.As(err, &ae) && ae.HTTPStatusCode == 0 {
		e := *ae
		e.HTTPStatusCode = http.StatusInternalServerError
		return &e
	}
	return err
}
