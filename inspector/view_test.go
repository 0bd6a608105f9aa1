package inspector

import (
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

func TestBuildJSONProtocolSteps(t *testing.T) {
	tr := &agent.Transcript{V: agent.TranscriptVersion, Protocol: agent.ProtocolJSON, Instruction: "file the cake", Status: agent.StatusAsking, Steps: 3,
		Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: "system"},
			{Role: agent.RoleUser, Content: "file the cake"},
			{Role: agent.RoleAssistant, Content: "Sure! {not json"},
			{Role: agent.RoleUser, Content: "Error: your reply could not be used: no JSON object."},
			{Role: agent.RoleAssistant, Content: `{"thought":"look first","action":{"type":"get_projects"}}`},
			{Role: agent.RoleUser, Content: "Observation: Projects (1): P1 Inbox"},
			{Role: agent.RoleAssistant, Content: `{"thought":"ask","action":{"type":"ask_user","question":"Which project?","options":["Home"]}}`},
		}}
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Build(&bot.Run{ID: "j", Status: bot.RunWaiting, Transcript: raw, Waiting: &bot.Waiting{Question: "Which project?"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Steps) != 3 {
		t.Fatalf("%d steps, want 3: %+v", len(v.Steps), v.Steps)
	}
	if s := v.Steps[0]; s.Thought != "Sure! {not json" || len(s.Actions) != 0 || len(s.Notes) != 1 {
		t.Errorf("step 1 (unusable reply): %+v", s)
	}
	if s := v.Steps[1]; s.Thought != "look first" || len(s.Actions) != 1 || s.Actions[0].Name != "get_projects" || s.Actions[0].Observation.Full != "Projects (1): P1 Inbox" {
		t.Errorf("step 2: %+v", s)
	}
	if a := v.Steps[2].Actions; len(a) != 1 || a[0].Question != "Which project?" || a[0].HasResult {
		t.Errorf("step 3: %+v", a)
	}
	if v.Question != "Which project?" {
		t.Errorf("question %q", v.Question)
	}
}

func TestGatesMarkConfirmedAndDeclinedWrites(t *testing.T) {
	st := Step{Wait: 1, Actions: []ActionView{
		{Name: agent.ActDeleteTasks, Write: true, HasResult: true, Observation: clip("The user said no; nothing was done. Do not retry it.")},
		{Name: agent.ActMoveTasks, Write: true, HasResult: true, Observation: clip("✓ moved")},
		{Name: agent.ActGetProjects, HasResult: true, Observation: clip("Projects")},
	}}
	gates(&st)
	if a := st.Actions; !a[0].Declined || a[0].Confirmed || !a[1].Confirmed || a[2].Confirmed {
		t.Errorf("actions %+v", a)
	}
	asked := Step{Wait: 1, Actions: []ActionView{{Name: agent.ActAskUser, HasResult: true}, {Name: agent.ActMoveTasks, Write: true, HasResult: true}}}
	gates(&asked)
	if asked.Actions[1].Confirmed {
		t.Error("a write after a question was marked confirmed")
	}
	still := Step{Actions: []ActionView{{Name: agent.ActMoveTasks, Write: true, HasResult: true}}}
	gates(&still)
	if still.Actions[0].Confirmed {
		t.Error("a write without a wait was marked confirmed")
	}
}

func TestDur(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{400 * time.Microsecond, "0.4ms"}, {850 * time.Millisecond, "850ms"}, {2400 * time.Millisecond, "2.4s"},
		{190 * time.Second, "3m10s"}, {2*time.Hour + 5*time.Minute + 10*time.Second, "2h5m0s"},
	} {
		if got := Dur(tt.d); got != tt.want {
			t.Errorf("Dur(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
