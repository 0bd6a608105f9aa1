// Command tidybench measures tidybot's agent against a baseline configured
// like the agent in the talk "How I gave ChatGPT access to my to-do list":
// both tidy an inbox of N tasks in 5 groups in the fake Todoist, driven by
// scripted (simulated, deterministic) models through the fake model
// server, and it prints model calls, Todoist requests, tokens and wall
// time side by side. A second table runs tidybot alone with
// OPENAI_MODEL=gpt-6-luna on both transports, Chat Completions (reasoning
// effort none, as Chat requires for tools) and the Responses API (effort
// low, encrypted reasoning carried between calls), with the fake server's
// reported usage: prompt tokens with the cached part, completion tokens
// with the reasoning part.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/sim"
)

// result is one system's figures for one inbox size.
type result struct {
	System           string        `json:"system"`
	N                int           `json:"n"`
	ModelCalls       int           `json:"model_calls"`
	TodoistRequests  int           `json:"todoist_requests"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Wall             time.Duration `json:"wall_ns"`
	InboxLeft        int           `json:"inbox_left"`
	// API, ReasoningTokens and CachedTokens are set in the transports
	// table.
	API             string `json:"api,omitempty"`
	Run             int    `json:"run,omitempty"`
	ReasoningTokens int    `json:"reasoning_tokens,omitempty"`
	CachedTokens    int    `json:"cached_tokens,omitempty"`
}

type settings struct {
	groups       int
	modelLatency time.Duration
	todoLatency  time.Duration
	protocol     agent.Protocol
}

func main() {
	sizes := flag.String("n", "10,50,200,1000", "inbox sizes")
	groups := flag.Int("groups", 5, "keyword groups in the inbox")
	modelLat := flag.Duration("model-latency", time.Second, "simulated latency of one model call")
	todoLat := flag.Duration("todoist-latency", 150*time.Millisecond, "simulated latency of one Todoist request")
	fast := flag.Bool("fast", false, "no simulated latency")
	asJSON := flag.Bool("json", false, "print JSON")
	protocol := flag.String("protocol", "tools", "tidybot's protocol: tools or json")
	transports := flag.Bool("transports", true, "also compare tidybot on Chat Completions and on the Responses API")
	flag.Parse()
	st := settings{groups: *groups, modelLatency: *modelLat, todoLatency: *todoLat, protocol: agent.Protocol(*protocol)}
	if *fast {
		st.modelLatency, st.todoLatency = 0, 0
	}
	var results []result
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "tidybench: bad size %q\n", s)
			os.Exit(2)
		}
		for _, sys := range []string{"tidybot", "baseline"} {
			r, err := measure(context.Background(), sys, n, st)
			if err != nil {
				fmt.Fprintln(os.Stderr, "tidybench:", err)
				os.Exit(1)
			}
			results = append(results, r)
		}
	}
	var byAPI []result
	if *transports {
		for _, s := range strings.Split(*sizes, ",") {
			n, _ := strconv.Atoi(strings.TrimSpace(s))
			for _, api := range []string{openai.APIChat, openai.APIResponses} {
				rs, err := measureAPI(context.Background(), api, n, st)
				if err != nil {
					fmt.Fprintln(os.Stderr, "tidybench:", err)
					os.Exit(1)
				}
				byAPI = append(byAPI, rs...)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(append(results, byAPI...))
		return
	}
	printTable(results, st)
	if len(byAPI) > 0 {
		printAPITable(byAPI, st)
	}
}

// measureAPI runs tidybot with gpt-6-luna on one transport, on a fresh
// fake account, with the usage the fake server reports; then runs it again
// on the same account and model server with a new inbox of n tasks, as a
// person's next /tidy-inbox would: the stable prompt prefix is then read
// from the server's prompt cache, and Todoist is read incrementally.
func measureAPI(ctx context.Context, api string, n int, st settings) ([]result, error) {
	todo := todoisttest.New(nil, todoisttest.WithLatency(st.todoLatency))
	defer todo.Close()
	mdl := openaitest.New(openaitest.FromAgent((&sim.Tidier{Groups: sim.TalkGroups}).Reply), openaitest.WithLatency(st.modelLatency))
	defer mdl.Close()
	hc := &http.Client{Timeout: 2 * time.Minute}
	model := openai.New(openai.Config{APIKey: "sk-bench", BaseURL: mdl.URL, Model: "gpt-6-luna", API: api}, hc)
	tasks := todoist.New(todo.Token, todo.URL, hc)
	var out []result
	for run := 1; run <= 2; run++ {
		todo.SeedInbox(n, st.groups)
		todo.ResetCounters()
		calls := mdl.Calls()
		r := result{System: "tidybot", N: n, API: api, Run: run}
		start := time.Now()
		o := agent.New(model, tasks, agent.Config{Protocol: st.protocol, MaxSteps: 50}).Start(ctx, agent.Input{Instruction: bot.TidyInboxInstruction, Overview: true}, agent.Hooks{})
		if o.Status != agent.StatusDone {
			return nil, fmt.Errorf("tidybot on %s at N=%d, run %d: %s: %s (%v)", api, n, run, o.Status, o.Answer, o.Err)
		}
		u := o.Transcript.Usage
		r.Wall = time.Since(start)
		r.ModelCalls = mdl.Calls() - calls
		r.TodoistRequests = todo.TotalRequests()
		r.PromptTokens, r.CompletionTokens, r.ReasoningTokens, r.CachedTokens = u.PromptTokens, u.CompletionTokens, u.ReasoningTokens, u.CachedTokens
		r.InboxLeft = len(todo.TasksIn(todo.InboxID()))
		out = append(out, r)
	}
	return out, nil
}

func printAPITable(rs []result, st settings) {
	fmt.Printf("\ntidybot with gpt-6-luna on each transport (the fake server's usage: cached ⊂ prompt, reasoning ⊂ completion; Chat Completions at effort none, Responses at low); run 2 tidies a new inbox on the same account and server\n\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N\tAPI\trun\tmodel calls\tTodoist requests\tprompt tokens\tcached\tcompletion tokens\treasoning\twall time\tinbox left\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", r.N, r.API, r.Run, r.ModelCalls, r.TodoistRequests, r.PromptTokens, r.CachedTokens, r.CompletionTokens, r.ReasoningTokens, r.Wall.Round(time.Millisecond), r.InboxLeft)
	}
	_ = w.Flush()
}

// measure runs one system on a fresh fake account.
func measure(ctx context.Context, system string, n int, st settings) (result, error) {
	todo := todoisttest.New(nil, todoisttest.WithLatency(st.todoLatency))
	defer todo.Close()
	todo.SeedInbox(n, st.groups)
	groups := sim.TalkGroups
	var script func(agent.Request) agent.Response
	if system == "tidybot" {
		script = (&sim.Tidier{Groups: groups}).Reply
	} else {
		ob := &oneByOne{groups: (&sim.Tidier{Groups: groups}).Project}
		script = ob.reply
	}
	mdl, err := sim.StartModel(script, st.modelLatency)
	if err != nil {
		return result{}, err
	}
	defer mdl.Close()
	hc := &http.Client{Timeout: 2 * time.Minute}
	model := openai.New(openai.Config{APIKey: "sk-bench", BaseURL: mdl.URL, Model: "simulated"}, hc)
	tasks := todoist.New(todo.Token, todo.URL, hc)
	todo.ResetCounters()

	r := result{System: system, N: n}
	start := time.Now()
	var usage agent.Usage
	if system == "tidybot" {
		out := agent.New(model, tasks, agent.Config{Protocol: st.protocol, MaxSteps: 50}).Start(ctx, agent.Input{Instruction: bot.TidyInboxInstruction, Overview: true}, agent.Hooks{})
		if out.Status != agent.StatusDone {
			return r, fmt.Errorf("tidybot at N=%d: %s: %s (%v)", n, out.Status, out.Answer, out.Err)
		}
		usage = out.Transcript.Usage
	} else {
		b := &baseline{model: model, tasks: tasks, hc: hc, apiURL: todo.URL, token: todo.Token, maxSteps: n + 50}
		if _, usage, err = b.run(ctx, bot.TidyInboxInstruction); err != nil {
			return r, err
		}
	}
	r.Wall = time.Since(start)
	r.ModelCalls = mdl.Calls()
	r.TodoistRequests = todo.TotalRequests()
	r.PromptTokens, r.CompletionTokens = usage.PromptTokens, usage.CompletionTokens
	r.InboxLeft = len(todo.TasksIn(todo.InboxID()))
	return r, nil
}

func printTable(rs []result, st settings) {
	fmt.Printf("tidybench: simulated models (scripted, deterministic); model latency %v per call, Todoist latency %v per request; tidybot protocol %s\n\n", st.modelLatency, st.todoLatency, st.protocol)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N\tsystem\tmodel calls\tTodoist requests\tprompt tokens\tcompletion tokens\twall time\tinbox left\t")
	for i := 0; i+1 < len(rs); i += 2 {
		a, b := rs[i], rs[i+1]
		for _, r := range []result{a, b} {
			fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t\n", r.N, r.System, r.ModelCalls, r.TodoistRequests, r.PromptTokens, r.CompletionTokens, r.Wall.Round(time.Millisecond), r.InboxLeft)
		}
		fmt.Fprintf(w, "%d\tratio\t%s\t%s\t%s\t%s\t%s\t\t\n", a.N, ratio(a.ModelCalls, b.ModelCalls), ratio(a.TodoistRequests, b.TodoistRequests),
			ratio(a.PromptTokens, b.PromptTokens), ratio(a.CompletionTokens, b.CompletionTokens), ratio(int(a.Wall), int(b.Wall)))
	}
	_ = w.Flush()
}

func ratio(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("1/%.1f", float64(b)/float64(max(a, 1)))
}
