package agent

import (
	"strings"
	"testing"
)

// TestPolicyAutopilotRefusesEachForbiddenWrite: an autopilot run (its
// policy chosen, or inferred from Touch as the bot started it before
// runs had a kind) whose model obeys a planted order writes nothing of
// what autopilot may not do, by action and by field, even with every
// task of the call its own; the refusal is the call's observation.
func TestPolicyAutopilotRefusesEachForbiddenWrite(t *testing.T) {
	for _, tc := range []struct{ name, action, args, obs string }{
		{"content", ActUpdateTasks, `{"updates":[{"task_id":"t2","content":"Wire $5000 to acct 123"}]}`, "may not set content"},
		{"description", ActUpdateTasks, `{"updates":[{"task_id":"t2","description":"https://evil.example"}]}`, "may not set description"},
		{"priority", ActUpdateTasks, `{"updates":[{"task_id":"t2","priority":"p1"}]}`, "may not set priority"},
		{"new label", ActUpdateTasks, `{"updates":[{"task_id":"t2","labels":["pwned"]}]}`, `no label "pwned"`},
		{"project by a new name", ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"PWNED call +1-555-0100"}]}`, "creates none"},
		{"unknown section", ActMoveTasks, `{"moves":[{"task_id":"t2","section_id":"s9"}]}`, "sections that exist"},
		{"create project", ActCreateProject, `{"name":"PWNED"}`, "not allowed"},
		{"create section", ActCreateSection, `{"project_id":"home","name":"PWNED"}`, "not allowed"},
		{"add", ActAddTasks, `{"tasks":[{"content":"call +1-555-0100"}]}`, "not allowed"},
		{"complete", ActCompleteTasks, `{"task_ids":["t2"]}`, "not allowed"},
		{"delete", ActDeleteTasks, `{"task_ids":["t2"]}`, "not allowed"},
		{"comment", ActAddComments, `{"comments":[{"task_id":"t2","content":"hi"}]}`, "not allowed"},
		{"ask", ActAskUser, `{"question":"May I?"}`, "not allowed"},
	} {
		for _, policy := range []PolicyName{PolicyAutopilot, ""} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				m := newTalkTasks()
				m.projects = append(m.projects, Project{ID: "home", Name: "Home"})
				m.labels = []Label{{ID: "l1", Name: "errands"}}
				before := m.tasks["t2"]
				s := &script{replies: []Response{
					tool(tc.action, tc.args),
					tool(ActFinalAnswer, `{"answer":"Done."}`),
				}}
				e := New(s, m, Config{Confirm: ConfirmNever})
				out := e.Start(t.Context(), Input{Instruction: "file t2", Overview: true, Touch: []string{"t2"}, Policy: policy}, Hooks{})
				if out.Status != StatusDone {
					t.Fatalf("status %s (%s), want done", out.Status, out.Answer)
				}
				if len(out.Transcript.Journal) != 0 || len(m.projects) != 2 || len(m.tasks) != 3 {
					t.Errorf("journal %v, %d projects, %d tasks: a forbidden write ran", out.Transcript.Journal, len(m.projects), len(m.tasks))
				}
				if after := m.tasks["t2"]; after.Content != before.Content || after.Description != "" || after.Priority != P4 || after.ProjectID != "inbox1" || len(after.Labels) != 0 {
					t.Errorf("t2 changed: %+v", after)
				}
				if obs := lastObs(s.reqs[1], "c_"+tc.action); !strings.Contains(obs, tc.obs) {
					t.Errorf("observation %q, want it to contain %q", obs, tc.obs)
				}
				if got := reload(t, out.Transcript).Policy; got != PolicyAutopilot && got != policy {
					t.Errorf("saved policy %q", got)
				}
			})
		}
	}
}

// TestPolicyDigestWritesNothing: the digest's policy allows no write.
func TestPolicyDigestWritesNothing(t *testing.T) {
	p := PolicyOf(PolicyDigest)
	for _, n := range ActionNames() {
		if IsWrite(n) && p.Allows(n) {
			t.Errorf("digest allows %s", n)
		}
	}
	if PolicyOf("no such kind").Name != PolicyDigest {
		t.Error("an unknown kind of run does not get the digest's read-only policy")
	}
}

// TestPolicyActionFieldsAreTheArguments: the fields a Rule may limit are
// the JSON names of what each item of the action sets, as its struct
// declares them (the schema's source).
func TestPolicyActionFieldsAreTheArguments(t *testing.T) {
	for action, want := range ActionFields {
		raw, ok := ActionSchema(action, false)
		if !ok {
			t.Fatalf("no schema for %s", action)
		}
		schema := string(raw)
		for _, f := range want {
			if !strings.Contains(schema, `"`+f+`"`) {
				t.Errorf("%s: field %s is not in its schema", action, f)
			}
		}
	}
	for _, p := range Policies() {
		for _, r := range p.Rules {
			if _, ok := actionByName(r.Action); !ok {
				t.Errorf("%s: rule for unknown action %s", p.Name, r.Action)
			}
			for _, f := range r.Fields {
				if !strings.Contains(strings.Join(ActionFields[r.Action], ","), f) {
					t.Errorf("%s: %s field %s is not one of ActionFields", p.Name, r.Action, f)
				}
			}
		}
	}
}
