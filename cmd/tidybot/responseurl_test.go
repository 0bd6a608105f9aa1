package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// TestSlackResponseURLIsItsPersons: in a DM between U1 and U2 where the
// bot is no member, U1's /tidy-inbox and, 0.7 s later while its run
// still works, U2's /tidy help. U1's answer (private: it quotes U1's
// Todoist) is shown through U1's response_url only, U2's help through
// U2's (issue 33, defect 4: one response_url per channel sent U1's
// answer to U2). And no chat.postMessage is tried there: the bot knows
// from conversations.open that the DM is not its own (defect 5).
func TestSlackResponseURLIsItsPersons(t *testing.T) {
	e := newEnv(t)
	e.model = openaitest.New(openaitest.FromAgent(func(agent.Request) agent.Response {
		b, _ := json.Marshal(map[string]string{"answer": "U1-PRIVATE: your overdue task is 'see the oncologist'."})
		return agent.Response{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "final_answer", Arguments: string(b)}}}
	}), openaitest.WithLatency(2500*time.Millisecond))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1", "slack:U2"}
	base := serve(t, e)
	const between = "D9" // U1 and U2's own DM
	sl.NotMember(between)
	command := func(user, cmd, text string) {
		t.Helper()
		form := sl.SlashCommand(between, user, cmd, text)
		if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
			t.Fatalf("%s: %d", cmd, code)
		}
	}
	command("U1", "/tidy-inbox", "")
	time.Sleep(700 * time.Millisecond) // the scenario's gap: U1's run is still at its model call
	command("U2", "/tidy", "help")
	shown := func(part string) bool {
		for _, p := range sl.Posts(between) {
			if strings.Contains(p.Shown(), part) {
				return true
			}
		}
		return false
	}
	waitFor(t, "U1's answer and U2's help", func() bool { return shown("U1-PRIVATE") && shown("/tidy") })
	var u1 bool
	for _, p := range sl.Posts(between) {
		if !p.ResponseURL || !p.Ephemeral || p.User == "" {
			t.Errorf("post %q: want it ephemeral, through a response_url", p.Shown())
		}
		if p.User != "U1" && (strings.Contains(p.Shown(), "U1-PRIVATE") || strings.Contains(p.Shown(), "Working on it")) {
			t.Errorf("U1's run posted to %s: %q", p.User, p.Shown())
		}
		u1 = u1 || (p.User == "U1" && strings.Contains(p.Shown(), "U1-PRIVATE"))
	}
	if !u1 {
		t.Error("U1's answer was not shown to U1")
	}
	if n := sl.Refused(); n != 0 {
		t.Errorf("%d calls refused by Slack (chat.postMessage in a DM the bot is not in), want 0", n)
	}
}
