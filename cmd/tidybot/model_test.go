package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// withModel restarts e's fake model server with opts and points tidybot
// at it with OPENAI_MODEL=model and every other model setting at its
// default.
func (e *env) withModel(t *testing.T, model string, opts ...openaitest.Option) {
	t.Helper()
	e.model.Close()
	e.model = openaitest.New(openaitest.FromAgent(e.scen.reply), opts...)
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL, e.cfg.OpenAIModel, e.cfg.OpenAIAPI, e.cfg.Effort = e.model.URL, model, "auto", ""
	e.cfg.MaxTokens = agent.DefaultMaxTokens
}

// run runs `tidybot chat` and returns stdout, stderr and Run's error.
func (e *env) run(t *testing.T, input string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errOut, Config: &e.cfg}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return out.String(), errOut.String(), err
}

// tidied checks the talk inbox was tidied into its three projects.
func (e *env) tidied(t *testing.T, out string) {
	t.Helper()
	mustContain(t, out, "Moved 9 tasks: 3 to ")
	got := e.layout()
	if len(got["Inbox"]) != 0 || len(got["PyData Talk"]) != 3 || len(got["Birthday Celebration"]) != 3 || len(got["Personal Website"]) != 3 {
		t.Errorf("layout: %v", got)
	}
}

// TestResponsesTidy: with OPENAI_MODEL=gpt-6-luna and nothing else set,
// both protocols run on the Responses API, statelessly, with the
// reasoning of each step carried into the next, and /usage shows the
// reasoning and cached tokens.
func TestResponsesTidy(t *testing.T) {
	for _, proto := range []string{"tools", "json"} {
		t.Run(proto, func(t *testing.T) {
			e := newEnv(t)
			e.withModel(t, "gpt-6-luna")
			e.cfg.Protocol = proto
			e.scen.check = true // steps enough to carry reasoning between
			e.todo.SeedTalkInbox()
			out := e.chat(t, "/tidy-inbox\n/usage\n", nil)
			e.tidied(t, out)
			mustContain(t, out, "completion tokens were the model's reasoning")
			reqs := e.model.Requests()
			carried := 0
			for _, r := range reqs {
				if r.API != openaitest.APIResponses || r.Store == nil || *r.Store || r.PreviousResponseID != "" || r.ReasoningEffort != "low" || r.Temperature != nil {
					t.Errorf("request %d: %s, store %v, previous %q, effort %q, temperature %v", r.Call, r.API, r.Store, r.PreviousResponseID, r.ReasoningEffort, r.Temperature)
				}
				if proto == "json" && (r.ResponseFormat == nil || r.ResponseFormat.Type != "json_schema") {
					t.Errorf("request %d: text.format %+v, want json_schema", r.Call, r.ResponseFormat)
				}
				carried = max(carried, r.ReasoningItems)
			}
			if len(reqs) < 2 || carried < len(reqs)-1 {
				t.Errorf("%d requests carrying at most %d reasoning items: want every earlier step's reasoning sent back", len(reqs), carried)
			}
		})
	}
}

// TestResponsesCrashResume: a run on the Responses API killed mid-run
// resumes in a new process from the saved transcript, the reasoning of
// the steps before the crash included, with nothing held on the server.
func TestResponsesCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newEnv(t)
	e.scen.check = true // a model call after the write, to crash in
	before, after := crashAndResume(t, e, "OPENAI_MODEL=gpt-6-luna")
	if len(before) < 2 || len(after) == 0 {
		t.Fatalf("%d requests before the kill, %d after", len(before), len(after))
	}
	killed := before[len(before)-1]
	resumed := after[0]
	if resumed.API != openaitest.APIResponses || resumed.PreviousResponseID != "" || resumed.Store == nil || *resumed.Store {
		t.Errorf("resumed request: %s, previous %q, store %v", resumed.API, resumed.PreviousResponseID, resumed.Store)
	}
	if resumed.ReasoningItems == 0 || resumed.ReasoningItems != killed.ReasoningItems || len(resumed.Messages) != len(killed.Messages) {
		t.Errorf("resumed with %d reasoning items and %d messages; the killed call had %d and %d",
			resumed.ReasoningItems, len(resumed.Messages), killed.ReasoningItems, len(killed.Messages))
	}
}

// TestNoResponsesFallsBackOnce: a server without /responses is asked
// once, then the run goes on over Chat Completions, gpt-6-luna calling
// tools there without reasoning.
func TestNoResponsesFallsBackOnce(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "gpt-6-luna", openaitest.WithoutResponses())
	e.todo.SeedTalkInbox()
	e.tidied(t, e.chat(t, "/tidy-inbox\n", nil))
	if n := e.model.Misses(); n != 1 {
		t.Errorf("/responses asked %d times, want once", n)
	}
	for _, r := range e.model.Requests() {
		if r.API != openaitest.APIChat || r.ReasoningEffort != "none" {
			t.Errorf("request %d: %s with effort %q", r.Call, r.API, r.ReasoningEffort)
		}
	}
}

func TestRetiredModelWarned(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "gpt-4.1-mini", openaitest.WithModels(openaitest.Model{ID: "gpt-4.1-mini", ShutdownDate: "2027-01-14"}))
	e.todo.SeedTalkInbox()
	out, logs, err := e.run(t, "/tidy-inbox\n")
	if err != nil {
		t.Fatal(err)
	}
	const notice = "⚠️ The model gpt-4.1-mini shuts down on 14 January 2027 (the shutdown_date the model API gives for it); OpenAI's deprecations page names gpt-6-luna as its replacement: set OPENAI_MODEL"
	if strings.Count(out, notice) != 1 || !strings.HasPrefix(out, notice) {
		t.Errorf("stdout does not start with the notice, once:\n%s", out)
	}
	mustContain(t, logs, "shutdown_date=2027-01-14", "replacement=gpt-6-luna")
	e.tidied(t, out)

	// A 2027-04-01 shutdown: the replacement tidybot chose, said to be
	// its choice.
	e = newEnv(t)
	e.withModel(t, "gpt-5.1")
	e.todo.SeedTalkInbox()
	out, _, _ = e.run(t, "/tidy-inbox\n")
	if !strings.HasPrefix(out, "⚠️ The model gpt-5.1 shuts down on 1 April 2027 (the shutdown_date the model API gives for it); OpenAI's deprecations page names no replacement tidybot could confirm: the nearest current model is gpt-6.1-sol: set OPENAI_MODEL") {
		t.Errorf("stdout does not start with the notice naming the chosen replacement:\n%s", out)
	}

	// A model the page names no plain replacement for gets none.
	e = newEnv(t)
	e.withModel(t, "gpt-5-pro")
	e.todo.SeedTalkInbox()
	out, _, _ = e.run(t, "/tidy-inbox\n")
	if !strings.HasPrefix(out, "⚠️ The model gpt-5-pro shuts down on 11 December 2026 (the shutdown_date the model API gives for it): set OPENAI_MODEL") {
		t.Errorf("stdout does not start with the notice without a replacement:\n%s", out)
	}
}

func TestModelRefusedAtStartup(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown model", func(c *Config) { c.OpenAIModel = "gpt-6-lunar" }, "OPENAI_MODEL=gpt-6-lunar does not exist at "},
		{"tools on Chat Completions while reasoning", func(c *Config) { c.OpenAIAPI, c.Effort = "chat", "low" },
			"OPENAI_MODEL=gpt-6-luna calls tools only through the Responses API at reasoning effort \"low\", and OPENAI_API=chat chose Chat Completions: set OPENAI_API=responses (or auto), or TIDYBOT_REASONING_EFFORT=none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.withModel(t, "gpt-6-luna", openaitest.WithModels(openaitest.Model{ID: "gpt-6-luna"}))
			tt.edit(&e.cfg)
			_, _, err := e.run(t, "/tidy-inbox\n")
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line with %q", err, tt.want)
			}
			if n := e.model.Calls(); n != 0 {
				t.Errorf("%d model calls before refusing", n)
			}
		})
	}
}

// TestCutOffReplyToldPlainly: a reply that does not fit
// TIDYBOT_MAX_TOKENS even at twice the limit ends the run with a plain
// message naming the setting.
func TestCutOffReplyToldPlainly(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "gpt-6-luna")
	e.cfg.MaxTokens = 20 // less than the reasoning alone
	e.todo.SeedTalkInbox()
	out, _, err := e.runChat(t, "/tidy-inbox\n", false)
	if err == nil || !strings.Contains(err.Error(), "a run failed") {
		t.Errorf("chat: err = %v; want a run failed", err)
	}
	mustContain(t, out, "the model's reply was cut off at its limit of 40 tokens (TIDYBOT_MAX_TOKENS): raise the limit, or ask for fewer tasks at a time")
	if n := e.model.Calls(); n != 2 {
		t.Errorf("%d model calls, want 2 (the retry with twice the limit)", n)
	}
}

// TestRetiredModelToldOnceOnTelegram: under serve, each conversation
// hears of the retiring model once, before its first run.
func TestRetiredModelToldOnceOnTelegram(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "gpt-4.1-mini", openaitest.WithModels(openaitest.Model{ID: "gpt-4.1-mini", ShutdownDate: "2027-01-14"}))
	e.todo.SeedTalkInbox()
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "/tidy-inbox")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastText(tg, 42), "Moved ") })
	tg.PushText(42, 42, "hello")
	waitFor(t, "the second answer", func() bool { return lastText(tg, 42) == "You said: hello" })
	var told int
	for _, m := range tg.Messages(42) {
		if strings.Contains(m.Text, "The model gpt-4.1-mini shuts down on 14 January 2027 (the shutdown_date the model API gives for it); OpenAI's deprecations page names gpt-6-luna") {
			told++
		}
	}
	if first := tg.Messages(42)[0].Text; told != 1 || !strings.HasPrefix(first, "⚠️ The model gpt-4.1-mini") {
		t.Errorf("told %d times, first message %q: want once, first", told, first)
	}
}

func TestTemperatureWhileReasoningWarned(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "gpt-6-luna")
	e.cfg.Temperature = 0.7
	_, logs, err := e.run(t, "")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, logs, "TIDYBOT_TEMPERATURE is not sent while the model reasons: set TIDYBOT_REASONING_EFFORT=none to use it")
	e.cfg.Effort = "none"
	if _, logs, _ = e.run(t, ""); strings.Contains(logs, "TIDYBOT_TEMPERATURE") {
		t.Errorf("warned with effort none:\n%s", logs)
	}
}

// TestLocalServerShortContext: a local server with an 8k context still
// tidies with the default TIDYBOT_MAX_TOKENS, which it cannot hold.
func TestLocalServerShortContext(t *testing.T) {
	e := newEnv(t)
	e.withModel(t, "qwen2.5:14b", openaitest.WithContextLength(8192))
	e.todo.SeedTalkInbox()
	e.tidied(t, e.chat(t, "/tidy-inbox\n", nil))
	if n, want := e.model.Calls(), e.model.Responses()+1; n != want {
		t.Errorf("%d calls for %d answers: want one refusal, then replies that fit", n, e.model.Responses())
	}
}
