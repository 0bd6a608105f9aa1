package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

var testTiers = []agent.ModelTier{{Name: "fast", Model: "m-mini"}, {Name: "best", Model: "m-large"}}

// /settings model picks a tier (TIDYBOT_MODELS): shown, stored, offered
// as buttons and in /help, and each run of the person asks its model.
func TestSettingsModelTier(t *testing.T) {
	e := newSettingsEnv(t, func(c *Config) { c.ModelTiers = testTiers })
	m := e.say(t, settingsIn(""))
	if !strings.Contains(m.Text, "• Model: fast (m-mini), the default") || !strings.Contains(m.Text, "/settings model fast|best|default") {
		t.Errorf("settings lack the model row and its usage:\n%s", m.Text)
	}
	var press string
	for _, b := range m.Buttons {
		if b.Data == "set:model:fast" {
			t.Error("a button for the tier already in use")
		}
		if b.Data == "set:model:best" {
			press = b.Data
		}
	}
	if press == "" {
		t.Fatalf("no button for best: %+v", m.Buttons)
	}
	e.say(t, msg("what's due?", "run0"))
	if in := e.agent.inputs[len(e.agent.inputs)-1]; in.Model != "m-mini" {
		t.Errorf("default run model %q, want the first tier's m-mini", in.Model)
	}
	// The button, as pressed.
	in := msg("", "pressm")
	in.Button, in.ButtonRef, in.MessageID = press, "cbm", "m1"
	if err := e.bot.Handle(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := e.bot.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ps, _ := e.bot.Settings(t.Context(), "telegram", "42"); ps.ModelTier != "best" {
		t.Fatalf("stored tier %q, want best", ps.ModelTier)
	}
	e.say(t, msg("what's due?", "run1"))
	if in := e.agent.inputs[len(e.agent.inputs)-1]; in.Model != "m-large" {
		t.Errorf("run model %q, want best's m-large", in.Model)
	}
	if m := e.say(t, settingsIn("model turbo")); !strings.Contains(m.Text, `The model is one of fast, best, or default; not "turbo"`) {
		t.Errorf("bad tier answered:\n%s", m.Text)
	}
	if ps, _ := e.bot.Settings(t.Context(), "telegram", "42"); ps.ModelTier != "best" {
		t.Errorf("a bad tier changed the setting: %q", ps.ModelTier)
	}
	if m := e.say(t, settingsIn("model default")); !strings.Contains(m.Text, "Model: the default, fast (m-mini)") {
		t.Errorf("model default answered:\n%s", m.Text)
	}
	if ps, _ := e.bot.Settings(t.Context(), "telegram", "42"); ps.ModelTier != "" {
		t.Errorf("default kept tier %q", ps.ModelTier)
	}
	h := msg("", "hm")
	h.Command = "help"
	if m := e.say(t, h); !strings.Contains(m.Text, "Models to choose from: fast, best (/settings model NAME).") {
		t.Errorf("help lacks the tiers:\n%s", m.Text)
	}
}

// Without tiers there is no model row nor button, /settings model says
// the owner offers no choice, and runs name no model.
func TestSettingsModelWithoutTiers(t *testing.T) {
	e := newSettingsEnv(t)
	m := e.say(t, settingsIn(""))
	if strings.Contains(m.Text, "Model:") {
		t.Errorf("a model row without tiers:\n%s", m.Text)
	}
	for _, b := range m.Buttons {
		if strings.HasPrefix(b.Data, "set:model:") {
			t.Errorf("a model button without tiers: %+v", b)
		}
	}
	if m := e.say(t, settingsIn("model best")); !strings.Contains(m.Text, "offers no choice of model") {
		t.Errorf("answered:\n%s", m.Text)
	}
	e.say(t, msg("what's due?", "run2"))
	if in := e.agent.inputs[len(e.agent.inputs)-1]; in.Model != "" {
		t.Errorf("run model %q without tiers", in.Model)
	}
}

// A run stopped before its first step was saved starts again at restart
// with the person's tier (and their other settings).
func TestRestartedRunKeepsTheTier(t *testing.T) {
	st := newMemStore()
	_ = st.SaveThread(t.Context(), Thread{Key: "telegram:c1:"})
	_ = st.SaveRun(t.Context(), &Run{ID: "r1", ThreadKey: "telegram:c1:", Platform: "telegram", ChatID: "c1", UserID: "42", Status: RunWorking, Instruction: "what's due?"})
	ag := &readerAgent{mockAgent: &mockAgent{}, loc: time.UTC}
	b := New(st, ag, Config{ModelTiers: testTiers})
	if err := b.SaveSettings(t.Context(), "telegram", "42", PersonSettings{ModelTier: "best", Language: "Dutch"}); err != nil {
		t.Fatal(err)
	}
	b.AddPlatform(&fakePlatform{name: "telegram"})
	startUntilIdle(t, b)
	if len(ag.inputs) != 1 || ag.inputs[0].Model != "m-large" || ag.inputs[0].Language != "Dutch" {
		t.Errorf("restarted run inputs %+v, want best's m-large in Dutch", ag.inputs)
	}
}

// An autopilot run asks the person's tier's model, at the model server.
func TestAutopilotAsksThePersonsTier(t *testing.T) {
	h := newAPHarness(t, Config{ModelTiers: testTiers})
	ps, err := h.bot.Settings(t.Context(), "telegram", "42")
	if err != nil {
		t.Fatal(err)
	}
	ps.ModelTier = "best"
	if err := h.bot.SaveSettings(t.Context(), "telegram", "42", ps); err != nil {
		t.Fatal(err)
	}
	h.add("Buy milk")
	h.tick(t)
	last, ok := h.model.LastRequest()
	if !ok || last.Model != "m-large" {
		t.Errorf("autopilot asked model %q (%v), want best's m-large", last.Model, ok)
	}
}
