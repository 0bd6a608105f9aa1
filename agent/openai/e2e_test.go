package openai_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/internal/sim"
)

// The engine, through this client and go-openai, against the fake model,
// with the real Todoist client against the fake Todoist: every request the
// engine makes must pass the fake's checks of the real API (strict
// schemas, tool messages answering tool calls, json in the prompt).

func inboxLeft(todo *todoisttest.Server) int { return len(todo.TasksIn(todo.InboxID())) }

func TestEngineEndToEnd(t *testing.T) {
	tests := []struct {
		proto agent.Protocol
		opts  []openaitest.Option
	}{
		{agent.ProtocolTools, nil},
		{agent.ProtocolJSON, nil},
		{agent.ProtocolJSON, []openaitest.Option{openaitest.WithoutResponseFormats("json_schema"), openaitest.WithoutUsage()}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d options", tt.proto, len(tt.opts)), func(t *testing.T) {
			todo := todoisttest.New(t)
			todo.SeedTalkInbox()
			tasks := todoist.New(todo.Token, todo.URL, todo.Client())
			tidier := &sim.Tidier{Groups: sim.TalkGroups}
			opts := append([]openaitest.Option{openaitest.WithAPIKey("sk-e2e")}, tt.opts...)
			srv, model, _ := start(t, openaitest.FromAgent(tidier.Reply), openai.Config{APIKey: "sk-e2e"}, opts...)

			out := agent.New(model, tasks, agent.Config{Protocol: tt.proto, MaxTokens: 1024}).
				Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Policy: agent.PolicyCommand}, agent.Hooks{})
			if out.Status != agent.StatusDone {
				t.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
			}
			if n := inboxLeft(todo); n != 0 {
				t.Errorf("%d tasks left in the inbox", n)
			}
			for _, r := range srv.Requests() {
				if r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens != 1024 {
					t.Errorf("call %d: temperature %v, max tokens %d; want 0 and 1024", r.Call, r.Temperature, r.MaxTokens)
				}
			}
			u := out.Transcript.Usage
			if u.Calls != srv.Responses() || u.PromptTokens <= 0 || u.CompletionTokens <= 0 {
				t.Errorf("usage %+v after %d responses", u, srv.Responses())
			}
			if wantEstimated := len(tt.opts) > 0; u.Estimated != wantEstimated {
				t.Errorf("usage estimated = %v, want %v", u.Estimated, wantEstimated)
			}
		})
	}
}

func TestEngineAskUserResumes(t *testing.T) {
	todo := todoisttest.New(t)
	seeded := todo.SeedTalkInbox()
	tasks := todoist.New(todo.Token, todo.URL, todo.Client())
	srv, model, _ := start(t, openaitest.Replies(
		openaitest.Call(agent.ActAskUser, `{"question":"Which project should the cake go to?","options":["Birthday","Groceries"]}`),
		openaitest.Call(agent.ActMoveTasks, fmt.Sprintf(`{"moves":[{"task_id":%q,"project_name":"Birthday","project_id":null,"section_id":null}]}`, seeded[3].ID)),
		openaitest.Call(agent.ActFinalAnswer, `{"answer":"Filed it under Birthday."}`),
	), openai.Config{})

	eng := agent.New(model, tasks, agent.Config{})
	out := eng.Start(t.Context(), agent.Input{Instruction: "file the abstract"}, agent.Hooks{})
	if out.Status != agent.StatusAsking {
		t.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
	}
	out = eng.Resume(t.Context(), out.Transcript, "Birthday", agent.Hooks{})
	if out.Status != agent.StatusDone || out.Answer != "Filed it under Birthday." {
		t.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
	}
	if srv.Calls() != 3 || srv.Responses() != 3 {
		t.Errorf("calls %d, responses %d; want 3 and 3 (no request refused)", srv.Calls(), srv.Responses())
	}
}

func TestEngineSurvivesA429(t *testing.T) {
	todo := todoisttest.New(t)
	todo.SeedTalkInbox()
	tasks := todoist.New(todo.Token, todo.URL, todo.Client())
	tidier := &sim.Tidier{Groups: sim.TalkGroups}
	first := true
	script := func(req openaitest.Request) openaitest.Reply {
		if first {
			first = false
			return openaitest.RateLimited("1")
		}
		return openaitest.FromAgent(tidier.Reply)(req)
	}
	srv, model, sl := start(t, script, openai.Config{})
	out := agent.New(model, tasks, agent.Config{}).Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Policy: agent.PolicyCommand}, agent.Hooks{})
	if out.Status != agent.StatusDone || inboxLeft(todo) != 0 {
		t.Fatalf("outcome %s %q (%v)", out.Status, out.Answer, out.Err)
	}
	if len(sl.waits) != 1 || sl.waits[0] != time.Second || srv.Calls() != srv.Responses()+1 {
		t.Errorf("waits %v, calls %d, responses %d", sl.waits, srv.Calls(), srv.Responses())
	}
}

// TestEngineEndToEndOnResponses: the same with gpt-6-luna on the
// Responses API, where the fake also checks the reasoning items the
// engine's transcript carries back and the function_call /
// function_call_output pairing, and where a batch larger than
// TIDYBOT_MAX_TOKENS is cut off and asked again.
func TestEngineEndToEndOnResponses(t *testing.T) {
	for _, proto := range []agent.Protocol{agent.ProtocolTools, agent.ProtocolJSON} {
		t.Run(string(proto), func(t *testing.T) {
			todo := todoisttest.New(t)
			todo.SeedTalkInbox()
			tasks := todoist.New(todo.Token, todo.URL, todo.Client())
			tidier := &sim.Tidier{Groups: sim.TalkGroups}
			srv, model, _ := start(t, openaitest.FromAgent(tidier.Reply), openai.Config{Model: "gpt-6-luna"})
			const limit = 90
			// 90 tokens hold every step but the 9-task move in the filing
			// form with its answer (with 64 of reasoning): that one is cut
			// off once. The margin is a few tokens: a change in what the
			// simulated model writes moves it.
			out := agent.New(model, tasks, agent.Config{Protocol: proto, MaxTokens: limit}).
				Start(t.Context(), agent.Input{Instruction: "Tidy my inbox", Policy: agent.PolicyCommand}, agent.Hooks{})
			if out.Status != agent.StatusDone || inboxLeft(todo) != 0 {
				t.Fatalf("outcome %s %q (%v), %d left in the inbox", out.Status, out.Answer, out.Err, inboxLeft(todo))
			}
			cut, carried := 0, 0
			for _, r := range srv.Requests() {
				if r.API != openaitest.APIResponses {
					t.Errorf("call %d on %s", r.Call, r.API)
				}
				if r.MaxTokens == 2*limit {
					cut++
				}
				carried = max(carried, r.ReasoningItems)
				if len(r.Replay) > 0 {
					t.Errorf("call %d did not send the earlier output back as it came: %q", r.Call, r.Replay)
				}
			}
			if cut != 1 || carried == 0 {
				t.Errorf("%d calls asked again with twice the limit, at most %d reasoning items carried: want 1 and some", cut, carried)
			}
			if u := out.Transcript.Usage; u.ReasoningTokens == 0 || u.Estimated {
				t.Errorf("usage %+v", u)
			}
		})
	}
}
