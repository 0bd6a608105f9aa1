// Command tidybench measures tidybot's agent against a baseline configured
// like the agent in the talk "How I gave ChatGPT access to my to-do list":
// both tidy an inbox of N tasks in 5 groups in the fake Todoist, driven by
// scripted (simulated, deterministic) models through the fake model
// server, and it prints model calls, Todoist requests, tokens, wall time
// and an estimated cost side by side. Model time is charged as a real
// model spends it (see rates) on a simulated clock and added to the
// measured time; Todoist's latency is slept. A second table runs tidybot alone with
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
	System           string `json:"system"`
	N                int    `json:"n"`
	ModelCalls       int    `json:"model_calls"`
	TodoistRequests  int    `json:"todoist_requests"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	// CachedTokens are the part of PromptTokens read from a prompt cache.
	CachedTokens int `json:"cached_tokens"`
	// Wall is the measured time plus ModelTime, the model's simulated
	// time; Cost is the estimated price in dollars.
	Wall      time.Duration `json:"wall_ns"`
	ModelTime time.Duration `json:"model_time_ns"`
	Cost      float64       `json:"cost_usd"`
	InboxLeft int           `json:"inbox_left"`
	// API and ReasoningTokens are set in the transports table.
	API             string `json:"api,omitempty"`
	Run             int    `json:"run,omitempty"`
	ReasoningTokens int    `json:"reasoning_tokens,omitempty"`
}

type settings struct {
	groups      int
	rates       rates
	todoLatency time.Duration
	protocol    agent.Protocol
}

func main() {
	sizes := flag.String("n", "10,50,200,1000", "inbox sizes")
	groups := flag.Int("groups", 5, "keyword groups in the inbox")
	rt := defaultRates
	flag.DurationVar(&rt.latency, "model-latency", rt.latency, "simulated fixed latency of one model call")
	flag.Float64Var(&rt.prefill, "prefill", rt.prefill, "simulated prompt tokens a second (cached ones take a tenth of the time)")
	flag.Float64Var(&rt.generation, "generation", rt.generation, "simulated completion tokens a second")
	flag.Float64Var(&rt.pricePrompt, "price-prompt", rt.pricePrompt, "dollars per million prompt tokens")
	flag.Float64Var(&rt.priceCached, "price-cached", rt.priceCached, "dollars per million cached prompt tokens")
	flag.Float64Var(&rt.priceCompletion, "price-completion", rt.priceCompletion, "dollars per million completion tokens")
	todoLat := flag.Duration("todoist-latency", 150*time.Millisecond, "simulated latency of one Todoist request (slept)")
	fast := flag.Bool("fast", false, "no Todoist latency (model time is charged on the simulated clock either way)")
	asJSON := flag.Bool("json", false, "print JSON")
	protocol := flag.String("protocol", "tools", "tidybot's protocol: tools or json")
	transports := flag.Bool("transports", true, "also compare tidybot on Chat Completions and on the Responses API")
	flag.Parse()
	st := settings{groups: *groups, rates: rt, todoLatency: *todoLat, protocol: agent.Protocol(*protocol)}
	if rt.prefill <= 0 || rt.generation <= 0 {
		fmt.Fprintln(os.Stderr, "tidybench: -prefill and -generation must be positive")
		os.Exit(2)
	}
	if *fast {
		st.todoLatency = 0
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
	mdl := openaitest.New(openaitest.FromAgent((&sim.Tidier{Groups: sim.TalkGroups}).Reply))
	defer mdl.Close()
	hc := &http.Client{Timeout: 2 * time.Minute}
	client := openai.New(openai.Config{APIKey: "sk-bench", BaseURL: mdl.URL, Model: "gpt-6-luna", API: api}, hc)
	tasks := todoist.New(todo.Token, todo.URL, hc)
	var out []result
	for run := 1; run <= 2; run++ {
		todo.SeedInbox(n, st.groups)
		todo.ResetCounters()
		calls := mdl.Calls()
		model := &clocked{Model: client, rates: st.rates}
		r := result{System: "tidybot", N: n, API: api, Run: run}
		start := time.Now()
		o := agent.New(model, tasks, agent.Config{Protocol: st.protocol, MaxSteps: 50}).Start(ctx, agent.Input{Instruction: bot.TidyInboxInstruction, Overview: true}, agent.Hooks{})
		if o.Status != agent.StatusDone {
			return nil, fmt.Errorf("tidybot on %s at N=%d, run %d: %s: %s (%v)", api, n, run, o.Status, o.Answer, o.Err)
		}
		r.ModelCalls = mdl.Calls() - calls
		r.ReasoningTokens = o.Transcript.Usage.ReasoningTokens
		r.charge(model, time.Since(start))
		r.TodoistRequests = todo.TotalRequests()
		r.InboxLeft = len(todo.TasksIn(todo.InboxID()))
		out = append(out, r)
	}
	return out, nil
}

func printAPITable(rs []result, st settings) {
	fmt.Printf("\ntidybot with gpt-6-luna on each transport (the fake server's usage: cached ⊂ prompt, reasoning ⊂ completion; Chat Completions at effort none, Responses at low; time and cost at the rates above); run 2 tidies a new inbox on the same account and server\n\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N\tAPI\trun\tmodel calls\tTodoist requests\tprompt tokens\tcached\tcompletion tokens\treasoning\twall time\tcost\tinbox left\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t\n", r.N, r.API, r.Run, r.ModelCalls, r.TodoistRequests, r.PromptTokens, r.CachedTokens, r.CompletionTokens, r.ReasoningTokens, r.Wall.Round(time.Millisecond), dollars(r.Cost), r.InboxLeft)
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
	mdl, err := sim.StartModel(script, 0)
	if err != nil {
		return result{}, err
	}
	defer mdl.Close()
	hc := &http.Client{Timeout: 2 * time.Minute}
	model := &clocked{Model: openai.New(openai.Config{APIKey: "sk-bench", BaseURL: mdl.URL, Model: "simulated"}, hc), rates: st.rates}
	tasks := todoist.New(todo.Token, todo.URL, hc)
	todo.ResetCounters()

	r := result{System: system, N: n}
	start := time.Now()
	if system == "tidybot" {
		out := agent.New(model, tasks, agent.Config{Protocol: st.protocol, MaxSteps: 50}).Start(ctx, agent.Input{Instruction: bot.TidyInboxInstruction, Overview: true}, agent.Hooks{})
		if out.Status != agent.StatusDone {
			return r, fmt.Errorf("tidybot at N=%d: %s: %s (%v)", n, out.Status, out.Answer, out.Err)
		}
	} else {
		b := &baseline{model: model, tasks: tasks, hc: hc, apiURL: todo.URL, token: todo.Token, maxSteps: n + 50}
		if _, _, err = b.run(ctx, bot.TidyInboxInstruction); err != nil {
			return r, err
		}
	}
	r.charge(model, time.Since(start))
	r.ModelCalls = mdl.Calls()
	r.TodoistRequests = todo.TotalRequests()
	r.InboxLeft = len(todo.TasksIn(todo.InboxID()))
	return r, nil
}

// charge sets r's tokens, model time, wall time (elapsed plus the model's
// simulated time) and cost from the calls of model.
func (r *result) charge(model *clocked, elapsed time.Duration) {
	u, spent := model.totals()
	r.PromptTokens, r.CachedTokens, r.CompletionTokens = u.PromptTokens, u.CachedTokens, u.CompletionTokens
	r.ModelTime = spent
	r.Wall = elapsed + spent
	r.Cost = model.rates.cost(u)
}

func printTable(rs []result, st settings) {
	fmt.Printf("tidybench: simulated models (scripted, deterministic), tidybot protocol %s. Model time charged on a simulated clock: %s. Cached: the prefix a call shares with the run's previous call. Todoist latency %v per request (slept). Wall time = measured + model time.\n\n", st.protocol, st.rates, st.todoLatency)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N\tsystem\tmodel calls\tTodoist requests\tprompt tokens\tcached\tcompletion tokens\twall time\tcost\tinbox left\t")
	for i := 0; i+1 < len(rs); i += 2 {
		a, b := rs[i], rs[i+1]
		for _, r := range []result{a, b} {
			fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t\n", r.N, r.System, r.ModelCalls, r.TodoistRequests, r.PromptTokens, r.CachedTokens, r.CompletionTokens, r.Wall.Round(time.Millisecond), dollars(r.Cost), r.InboxLeft)
		}
		fmt.Fprintf(w, "%d\tratio\t%s\t%s\t%s\t\t%s\t%s\t%s\t\t\n", a.N, ratio(a.ModelCalls, b.ModelCalls), ratio(a.TodoistRequests, b.TodoistRequests),
			ratio(a.PromptTokens, b.PromptTokens), ratio(a.CompletionTokens, b.CompletionTokens), ratio(int(a.Wall), int(b.Wall)), ratio(int(a.Cost*1e9), int(b.Cost*1e9)))
	}
	_ = w.Flush()
}

func dollars(d float64) string { return fmt.Sprintf("$%.4f", d) }

func ratio(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("1/%.1f", float64(b)/float64(max(a, 1)))
}
