package openaitest_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

func streamClient(srv *openaitest.Server) *goopenai.Client {
	c := goopenai.DefaultConfig("k")
	c.BaseURL = srv.URL
	c.HTTPClient = srv.Client()
	return goopenai.NewClientWithConfig(c)
}

// TestStreamChat reads a streamed chat completion with go-openai's own
// stream reader: content and a tool call's arguments arrive in pieces,
// the last chunk says why it finished, usage comes when asked for.
func TestStreamChat(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(openaitest.Reply{Content: "Thinking it over.",
		ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "final_answer", Arguments: `{"answer":"Tidy ✓ now"}`}}}))
	defer srv.Close()
	st, err := streamClient(srv).CreateChatCompletionStream(t.Context(), goopenai.ChatCompletionRequest{Model: "gpt-4o",
		Messages:      []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var content, args, name, finish string
	chunks, usage := 0, 0
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if content != "Thinking it over." || name != "final_answer" || args != `{"answer":"Tidy ✓ now"}` || finish != "tool_calls" {
		t.Errorf("got content %q, call %s(%s), finish %q", content, name, args, finish)
	}
	if chunks < 10 || usage == 0 {
		t.Errorf("got %d chunks and %d completion tokens; want the text in pieces and the usage", chunks, usage)
	}
	if srv.Responses() != 1 {
		t.Errorf("got %d answered, want 1", srv.Responses())
	}
}

// TestStreamResponses reads a streamed response with go-openai: text
// deltas, function call argument deltas, and the whole response last.
func TestStreamResponses(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(openaitest.Call("final_answer", `{"answer":"All filed."}`)))
	defer srv.Close()
	st, err := streamClient(srv).CreateResponseStream(t.Context(), goopenai.CreateResponseRequest{Model: "gpt-4o", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var args string
	var types []string
	var done *goopenai.CreateResponseResponse
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, string(ev.Type))
		switch ev.Type {
		case goopenai.ResponseStreamEventFunctionArgumentsDelta:
			args += ev.Delta
		case goopenai.ResponseStreamEventCompleted:
			done = ev.Response
		}
	}
	if args != `{"answer":"All filed."}` {
		t.Errorf("got arguments %q", args)
	}
	if done == nil || done.Status != goopenai.ResponseStatusCompleted || len(done.Output) == 0 {
		t.Fatalf("got last response %+v; events %v", done, types)
	}
	if types[0] != "response.created" || !strings.Contains(strings.Join(types, " "), "response.output_item.done") {
		t.Errorf("got events %v", types)
	}
}

// TestStreamFailsMidway breaks both streams after a few characters: the
// client sees the text so far, then an error.
func TestStreamFailsMidway(t *testing.T) {
	for _, api := range []string{openaitest.APIChat, openaitest.APIResponses} {
		t.Run(api, func(t *testing.T) {
			srv := openaitest.New(openaitest.Replies(openaitest.Text("One two three four five six").FailAfter(8)))
			defer srv.Close()
			c := streamClient(srv)
			var text string
			var err error
			if api == openaitest.APIChat {
				st, e := c.CreateChatCompletionStream(t.Context(), goopenai.ChatCompletionRequest{Model: "gpt-4o", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
				if e != nil {
					t.Fatal(e)
				}
				defer st.Close()
				for {
					var ch goopenai.ChatCompletionStreamResponse
					if ch, err = st.Recv(); err != nil {
						break
					}
					for _, c := range ch.Choices {
						text += c.Delta.Content
					}
				}
				var ae *goopenai.APIError
				if !errors.As(err, &ae) || ae.Type != "server_error" {
					t.Errorf("got error %v, want the server's error", err)
				}
			} else {
				st, e := c.CreateResponseStream(t.Context(), goopenai.CreateResponseRequest{Model: "gpt-4o", Input: "hi"})
				if e != nil {
					t.Fatal(e)
				}
				defer st.Close()
				sawError := false
				for {
					var ev goopenai.ResponseStreamEvent
					if ev, err = st.Recv(); err != nil {
						break
					}
					text += ev.Delta
					sawError = sawError || (ev.Type == goopenai.ResponseStreamEventError && ev.Code == "server_error")
				}
				if !sawError {
					t.Error("no error event")
				}
			}
			if text != "One two " {
				t.Errorf("got text %q before the error, want %q", text, "One two ")
			}
			if srv.Responses() != 0 {
				t.Errorf("a broken stream counted as answered")
			}
		})
	}
}

// TestStreamTokenRate paces the pieces: 20 tokens at 200 a second take
// about 100 ms.
func TestStreamTokenRate(t *testing.T) {
	srv := openaitest.New(openaitest.Replies(openaitest.Text(strings.Repeat("abcd", 20))), openaitest.WithTokenRate(200))
	defer srv.Close()
	start := time.Now()
	st, err := streamClient(srv).CreateChatCompletionStream(t.Context(), goopenai.ChatCompletionRequest{Model: "gpt-4o", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for {
		c, err := st.Recv()
		if err != nil {
			break
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			n++
		}
	}
	if n != 20 {
		t.Errorf("got %d pieces, want 20", n)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("the stream took %v; 20 tokens at 200/s take at least 100 ms", d)
	}
}

// TestStreamOptionsWithoutStream is refused, as the API refuses it.
func TestStreamOptionsWithoutStream(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	status, _, out := post(t, srv, "/v1/chat/completions", "", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`)
	if status != 400 || errorOf(t, out)["param"] != "stream_options" {
		t.Errorf("got %d %v", status, out)
	}
}
