package openai_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// heard collects what the engine hears of a streamed reply.
type heard struct {
	mu      sync.Mutex
	deltas  []agent.Delta
	answers []string
}

func (h *heard) delta(d agent.Delta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deltas = append(h.deltas, d)
}

func (h *heard) answer(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers = append(h.answers, s)
}

// TestStreamedCallIsTheSameReply streams a reply with text and a tool
// call on both APIs: the pieces arrive one by one, and the Response is
// the one the call without streaming returns (content, calls, usage).
func TestStreamedCallIsTheSameReply(t *testing.T) {
	reply := openaitest.Reply{Content: "Filing them.", ToolCalls: []openaitest.ToolCall{{ID: "call_a", Name: "final_answer", Arguments: `{"answer":"Done: 3 tasks moved."}`}}}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			srv, model, _ := start(t, func(openaitest.Request) openaitest.Reply { return reply }, openai.Config{API: api})
			req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "tidy"}},
				Tools:      []agent.Tool{{Name: "final_answer", Parameters: []byte(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`), Strict: true}},
				ToolChoice: "required", MaxTokens: 500}
			plain, err := model.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			h := &heard{}
			req.Stream = h.delta
			streamed, err := model.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if streamed.Content != plain.Content || len(streamed.ToolCalls) != 1 || streamed.ToolCalls[0] != plain.ToolCalls[0] ||
				streamed.FinishReason != plain.FinishReason {
				t.Errorf("streamed %+v, plain %+v", streamed, plain)
			}
			if streamed.Usage.PromptTokens != plain.Usage.PromptTokens || streamed.Usage.CompletionTokens != plain.Usage.CompletionTokens || streamed.Usage.Estimated {
				t.Errorf("streamed usage %+v, plain %+v", streamed.Usage, plain.Usage)
			}
			if api == openai.APIResponses && len(streamed.State) == 0 {
				t.Error("a streamed response has no state to send back")
			}
			var args, text strings.Builder
			for _, d := range h.deltas {
				args.WriteString(d.Arguments)
				text.WriteString(d.Content)
			}
			if args.String() != reply.ToolCalls[0].Arguments || text.String() != reply.Content || len(h.deltas) < 5 {
				t.Errorf("heard %d pieces: text %q, arguments %q", len(h.deltas), text.String(), args.String())
			}
			if last, ok := srv.LastRequest(); !ok || !last.Stream || (api == openai.APIChat && !last.IncludeUsage) {
				t.Errorf("the last request was not streamed with its usage: %+v", last)
			}
		})
	}
}

// TestStreamBrokenMidwayIsRetried: an error event after a few words is
// a server error, the call is made again, and the engine hears a reset
// before the second attempt's pieces.
func TestStreamBrokenMidwayIsRetried(t *testing.T) {
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			answer := openaitest.Call("final_answer", `{"answer":"All three filed."}`)
			srv, model, sl := start(t, openaitest.Replies(answer.FailAfter(15), answer), openai.Config{API: api})
			h := &heard{}
			req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "tidy"}}, Stream: h.delta}
			out, err := model.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.ToolCalls) != 1 || out.ToolCalls[0].Arguments != `{"answer":"All three filed."}` {
				t.Errorf("got %+v", out)
			}
			if srv.Calls() != 2 || len(sl.waits) != 1 {
				t.Errorf("got %d calls and %d waits, want a retry", srv.Calls(), len(sl.waits))
			}
			resets := 0
			for _, d := range h.deltas {
				if d.Reset {
					resets++
				}
			}
			if resets != 2 {
				t.Errorf("heard %d resets, want one per attempt", resets)
			}
		})
	}
}

// TestEngineStreamsTheAnswer runs the engine with Hooks.Answer on both
// protocols: a json reply's answer grows word by word as the model
// writes it; a tools reply's is heard once, whole, when the reply turned
// out to be that one call (it might have carried writes after it). The
// last text heard is the answer.
func TestEngineStreamsTheAnswer(t *testing.T) {
	const want = "Moved \"Call mum\" to Family.\nNothing else to do ✓"
	for _, proto := range []agent.Protocol{agent.ProtocolTools, agent.ProtocolJSON} {
		for _, api := range []string{openai.APIChat, openai.APIResponses} {
			t.Run(string(proto)+"/"+api, func(t *testing.T) {
				todo := todoisttest.New(t)
				tasks := todoist.New(todo.Token, todo.URL, todo.Client())
				reply := openaitest.Call("final_answer", `{"answer":"Moved \"Call mum\" to Family.\nNothing else to do \u2713"}`)
				if proto == agent.ProtocolJSON {
					reply = openaitest.Text(`{"thought":"say \"answer\": done","action":{"type":"final_answer","answer":"Moved \"Call mum\" to Family.\nNothing else to do ✓"}}`)
				}
				_, model, _ := start(t, openaitest.Replies(reply), openai.Config{API: api})
				h := &heard{}
				out := agent.New(model, tasks, agent.Config{Protocol: proto, MaxTokens: 1024}).
					Start(t.Context(), agent.Input{Instruction: "file it"}, agent.Hooks{Answer: h.answer})
				if out.Status != agent.StatusDone || out.Answer != want {
					t.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
				}
				if proto == agent.ProtocolTools && len(h.answers) != 1 {
					t.Fatalf("heard %q, want the answer once, whole", h.answers)
				}
				if proto == agent.ProtocolJSON && len(h.answers) < 5 {
					t.Fatalf("heard %q, want it growing", h.answers)
				}
				if h.answers[len(h.answers)-1] != want {
					t.Fatalf("heard %q", h.answers)
				}
				for i := 1; i < len(h.answers); i++ {
					if !strings.HasPrefix(h.answers[i], h.answers[i-1]) {
						t.Errorf("answer %d %q does not extend %q", i, h.answers[i], h.answers[i-1])
					}
				}
			})
		}
	}
}

// TestStreamedCallHonoursRetryAfter: a 429 before the stream begins is
// waited out for its Retry-After, as without streaming.
func TestStreamedCallHonoursRetryAfter(t *testing.T) {
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			_, model, sl := start(t, openaitest.Replies(openaitest.RateLimited("7"), openaitest.Text("ok")), openai.Config{API: api})
			h := &heard{}
			if _, err := model.Complete(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, Stream: h.delta}); err != nil {
				t.Fatal(err)
			}
			if len(sl.waits) != 1 || sl.waits[0] < 7*time.Second {
				t.Errorf("waits %v, want one of 7 s", sl.waits)
			}
		})
	}
}

// TestStreamingAnswerIsNotSlow: while the reply arrives (its answer
// streams for about 600 ms, held until whole on the tools protocol), the
// run posts no "the model is slow" note after 300 ms; a model silent for
// 1 s before its answer gets one.
func TestStreamingAnswerIsNotSlow(t *testing.T) {
	for _, latency := range []time.Duration{0, time.Second} {
		todo := todoisttest.New(t)
		tasks := todoist.New(todo.Token, todo.URL, todo.Client())
		reply := openaitest.Call("final_answer", `{"answer":"`+strings.Repeat("word ", 48)+`"}`)
		_, model, _ := start(t, openaitest.Replies(reply), openai.Config{}, openaitest.WithTokenRate(100), openaitest.WithLatency(latency))
		var mu sync.Mutex
		var notes []string
		h := agent.Hooks{Answer: func(string) {}, Observe: func(ev agent.Event) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Kind == agent.EventNote {
				notes = append(notes, ev.Summary)
			}
		}}
		out := agent.New(model, tasks, agent.Config{MaxTokens: 1024, SlowAfter: 300 * time.Millisecond}).Start(t.Context(), agent.Input{Instruction: "hi"}, h)
		if out.Status != agent.StatusDone {
			t.Fatalf("outcome %s %v", out.Status, out.Err)
		}
		mu.Lock()
		slow := len(notes) > 0
		mu.Unlock()
		if slow != (latency > 0) {
			t.Errorf("latency %v: notes %q", latency, notes)
		}
	}
}
