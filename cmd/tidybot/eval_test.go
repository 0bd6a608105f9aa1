package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/internal/eval"
	"github.com/tidybot/tidybot/internal/sim"
)

// evalConfig is the end-to-end tests' configuration with the model at
// baseURL, the JSON protocol, and no Todoist token.
func evalConfig(t *testing.T, baseURL string) Config {
	cfg := newEnv(t).cfg
	cfg.OpenAIKey, cfg.OpenAIBaseURL, cfg.OpenAIModel = "sk-eval", baseURL, "scripted-eval"
	cfg.TodoistToken, cfg.TodoistURL = "", "https://api.todoist.com/api/v1" // never used
	cfg.Protocol = "json"
	return cfg
}

func runEval(t *testing.T, cfg Config, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Args: append([]string{"eval"}, args...), Stdout: &out, Stderr: &errOut, Config: &cfg}
	err = m.Run(t.Context())
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return out.String(), errOut.String(), err
}

// TestEvalConfiguredModel: eval measures the model that OPENAI_* and
// TIDYBOT_PROTOCOL configure (here a scripted one behind the fake
// OpenAI server, which checks the key), with no Todoist token.
func TestEvalConfiguredModel(t *testing.T) {
	srv := openaitest.New(openaitest.FromAgent((&sim.Solver{Suite: eval.Suite()}).Reply), openaitest.WithAPIKey("sk-eval"))
	t.Cleanup(srv.Close)
	out, errOut, err := runEval(t, evalConfig(t, srv.URL), "-k", "2", "-run", "^(inbox-talk|read-urgent)$", "-json", "-parallel", "2")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Model != "scripted-eval" || rep.Protocol != "json" || rep.Simulated || rep.K != 2 || len(rep.Tasks) != 2 {
		t.Errorf("report model %q protocol %q simulated %v k %d tasks %d", rep.Model, rep.Protocol, rep.Simulated, rep.K, len(rep.Tasks))
	}
	if rep.Total.Pass1 != 1 || rep.Total.PassK != 1 || rep.Total.Calls != srv.Responses() {
		t.Errorf("total %+v; the model server answered %d calls", rep.Total, srv.Responses())
	}
	if !strings.Contains(errOut, "eval: 4/4 attempts, 4 passed") {
		t.Errorf("no progress line on stderr:\n%s", errOut)
	}

	// The same suite with a wrong key stops at once, saying why.
	cfg := evalConfig(t, srv.URL)
	cfg.OpenAIKey = "sk-wrong"
	if _, _, err := runEval(t, cfg, "-k", "3", "-run", "read-urgent"); err == nil || !strings.Contains(err.Error(), "model never answered") || strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("wrong key: err %v, want a stop that names no key", err)
	}
}

// TestEvalSimulated: -sim labels its table as simulated, and a faulty
// script's failures are listed with their reasons.
func TestEvalSimulated(t *testing.T) {
	out, _, err := runEval(t, evalConfig(t, "https://api.openai.com/v1"), "-sim", "-sim-fault", "never-asks", "-k", "1", "-run", "^ask-|read-urgent", "-min-pass", "0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SIMULATED", "TOTAL (3 tasks × 1)", "read-urgent", "Failures:",
		"ask-two-projects #1: never asked the user", "ask-which-task #1: never asked the user"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestEvalFailsBelowMinPass: eval gates CI as a test runner does: a
// suite whose pass^k is below -min-pass (default 1: every task solved in
// every attempt) returns an error (tidybot exits 1) naming the score,
// the threshold and the failed tasks, after the report; at or above it,
// the table's last line says the same figures and eval succeeds.
func TestEvalFailsBelowMinPass(t *testing.T) {
	cfg := evalConfig(t, "https://api.openai.com/v1")
	faulty := []string{"-sim", "-sim-fault", "never-asks", "-k", "1", "-run", "^ask-|read-urgent"}

	out, _, err := runEval(t, cfg, faulty...)
	if err == nil || !strings.Contains(err.Error(), "FAIL: pass^1 0.33 is below -min-pass 1.00 (2 of 3 tasks failed an attempt: ask-") {
		t.Errorf("default -min-pass with 2 of 3 tasks failed: err %v, want a FAIL naming score and threshold", err)
	}
	if !strings.Contains(out, "Failures:") || strings.Contains(out, "ok:") {
		t.Errorf("the report is still printed, without an ok line:\n%s", out)
	}
	if _, _, err := runEval(t, cfg, append(faulty, "-json", "-min-pass", "0.5")...); err == nil || !strings.Contains(err.Error(), "below -min-pass 0.50") {
		t.Errorf("-json -min-pass 0.5: err %v, want a FAIL", err)
	}

	out, _, err = runEval(t, cfg, append(faulty, "-min-pass", "0.3")...)
	if err != nil {
		t.Fatalf("-min-pass 0.3 with pass^1 0.33: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "ok: pass^1 0.33, -min-pass 0.30" {
		t.Errorf("last line %q, want the score and the threshold", lines[len(lines)-1])
	}
	out, _, err = runEval(t, cfg, "-sim", "-k", "2", "-run", "read-urgent")
	if err != nil || !strings.HasSuffix(out, "ok: pass^2 1.00, -min-pass 1.00\n") {
		t.Errorf("a clean suite at the default: err %v\n%s", err, out)
	}
}

func TestEvalBadFlags(t *testing.T) {
	cfg := evalConfig(t, "https://api.openai.com/v1")
	for _, args := range [][]string{
		{"-k", "0"}, {"-parallel", "0"}, {"-run", "("}, {"-run", "no-such-task"}, {"-sim-fault", "deletes"},
		{"-sim", "-sim-fault", "bogus"}, {"extra"}, {"-bogus"}, {"-min-pass", "1.5"}, {"-min-pass", "-0.1"},
	} {
		if _, _, err := runEval(t, cfg, args...); err == nil {
			t.Errorf("eval %v: no error", args)
		}
	}
	// Asked for, the usage goes to stdout (TestEverySubcommandAnswersHelp).
	if out, _, err := runEval(t, cfg, "-h"); err != nil || !strings.Contains(out, "Usage: tidybot eval") {
		t.Errorf("eval -h: %v\n%s", err, out)
	}
}

func TestHelpListsEval(t *testing.T) {
	var out bytes.Buffer
	m := &Main{Args: []string{"-h"}, Stdout: &out, Stderr: &out}
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "tidybot eval      measure the configured model") {
		t.Errorf("tidybot -h does not list eval:\n%s", out.String())
	}
}
