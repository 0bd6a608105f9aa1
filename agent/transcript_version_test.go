package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The previous build of the transcript format, frozen: transcriptV1 is
// the Transcript of version 1 as commit 402598c declared it (every JSON
// key it knows; the values it keeps whole are kept raw here), and
// decodeV1 is that commit's UnmarshalTranscript. What transcriptV1 does
// not know, a version-1 replica drops when it resumes the run.
type transcriptV1 struct {
	V           int             `json:"v"`
	Protocol    json.RawMessage `json:"protocol"`
	Instruction json.RawMessage `json:"instruction"`
	Status      json.RawMessage `json:"status"`
	Confirm     json.RawMessage `json:"confirm,omitempty"`
	TimeZone    json.RawMessage `json:"tz,omitempty"`
	Model       json.RawMessage `json:"model,omitempty"`
	Language    json.RawMessage `json:"language,omitempty"`
	Allow       json.RawMessage `json:"allow,omitempty"`
	Touch       json.RawMessage `json:"touch,omitempty"`
	Messages    json.RawMessage `json:"messages"`
	Actions     json.RawMessage `json:"actions,omitempty"`
	Calls       json.RawMessage `json:"calls,omitempty"`
	Wait        json.RawMessage `json:"wait,omitempty"`
	Pending     json.RawMessage `json:"pending,omitempty"`
	Steps       json.RawMessage `json:"steps"`
	Repairs     json.RawMessage `json:"repairs"`
	Usage       json.RawMessage `json:"usage"`
	Elapsed     json.RawMessage `json:"elapsed"`
	Seen        json.RawMessage `json:"seen,omitempty"`
	Failures    json.RawMessage `json:"failures,omitempty"`
	Journal     json.RawMessage `json:"journal,omitempty"`
	Answer      json.RawMessage `json:"answer,omitempty"`
	Reported    json.RawMessage `json:"reported,omitempty"`
	Known       struct {
		Projects      json.RawMessage `json:"projects,omitempty"`
		ProjectsFresh json.RawMessage `json:"projects_fresh,omitempty"`
		Sections      json.RawMessage `json:"sections,omitempty"`
		Tasks         json.RawMessage `json:"tasks,omitempty"`
		TasksFresh    json.RawMessage `json:"tasks_fresh,omitempty"`
		InboxID       json.RawMessage `json:"inbox_id,omitempty"`
		Suspect       json.RawMessage `json:"suspect,omitempty"`
		Aliases       json.RawMessage `json:"aliases,omitempty"`
		Listed        json.RawMessage `json:"listed,omitempty"`
	} `json:"known"`
	Spans json.RawMessage `json:"spans,omitempty"`
}

// decodeV1 is 402598c's UnmarshalTranscript: version 1 only.
func decodeV1(b []byte) (*transcriptV1, error) {
	var t transcriptV1
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("agent: decode transcript: %w", err)
	}
	if t.V != 1 {
		return nil, fmt.Errorf("agent: transcript version %d, want %d", t.V, 1)
	}
	return &t, nil
}

// throughV1 is what a version-1 replica saves of raw after resuming it
// (decoded, then encoded again), and what it dropped: the JSON paths of
// raw it did not keep.
func throughV1(t *testing.T, raw []byte) (saved []byte, dropped []string) {
	t.Helper()
	old, err := decodeV1(raw)
	if err != nil {
		t.Fatalf("the previous build refuses it: %v", err)
	}
	if saved, err = json.Marshal(old); err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := json.Unmarshal(raw, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(saved, &after); err != nil {
		t.Fatal(err)
	}
	return saved, droppedKeys("", before, after)
}

func droppedKeys(at string, before, after map[string]any) []string {
	var out []string
	for k, v := range before {
		w, ok := after[k]
		if !ok {
			out = append(out, at+k)
			continue
		}
		vm, isMap := v.(map[string]any)
		wm, _ := w.(map[string]any)
		if isMap && wm != nil {
			out = append(out, droppedKeys(at+k+".", vm, wm)...)
		} else if !reflect.DeepEqual(v, w) {
			out = append(out, at+k)
		}
	}
	return out
}

// TestTranscriptOfVersion1IsResumed: transcripts that 402598c's engine
// saved (testdata/transcript-v1, written by that commit's engine with
// the scripted model and memTasks of its tests: a person's message
// asking a question, an autopilot run with Allow and Touch interrupted
// after its overview) are resumed by this build, autopilot's under
// autopilot's policy, inferred.
func TestTranscriptOfVersion1IsResumed(t *testing.T) {
	read := func(name string) *Transcript {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join("testdata", "transcript-v1", name))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := UnmarshalTranscript(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return tr
	}
	t.Run("message", func(t *testing.T) {
		m := newTalkTasks()
		s := &script{replies: []Response{
			tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Home"}]}`),
			tool(ActFinalAnswer, `{"answer":"Moved."}`),
		}}
		out := New(s, m, Config{}).Resume(t.Context(), read("message-asking.json"), "Home", Hooks{})
		if out.Status != StatusDone || out.Answer != "Moved." {
			t.Fatalf("outcome %s %q (err %v)", out.Status, out.Answer, out.Err)
		}
		if !strings.Contains(m.where(), "Buy birthday cake@Home") {
			t.Errorf("state: %s", m.where())
		}
	})
	t.Run("autopilot", func(t *testing.T) {
		m := newTalkTasks()
		m.projects = append(m.projects, Project{ID: "p_home", Name: "Home"})
		s := &script{replies: []Response{
			// Creating a project is outside autopilot's policy; the
			// version-1 transcript's Allow and Touch allowed it.
			tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Cakes"}]}`),
			tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Home"}]}`),
			tool(ActFinalAnswer, `{"answer":"Filed."}`),
		}}
		out := New(s, m, Config{}).Resume(t.Context(), read("autopilot-interrupted.json"), "", Hooks{})
		if out.Status != StatusDone {
			t.Fatalf("outcome %s %q (err %v)", out.Status, out.Answer, out.Err)
		}
		if got := m.where(); strings.Contains(got, "Cakes") || !strings.Contains(got, "Buy birthday cake@Home") {
			t.Errorf("state: %s (want no project created, the cake in Home)", got)
		}
	})
}

// TestPreviousBuildReadsWhatThisWrites: a person's message started here
// is saved as version 1; the previous build reads it and drops only its
// policy, which this build infers back the same.
func TestPreviousBuildReadsWhatThisWrites(t *testing.T) {
	m := newTalkTasks()
	s := &script{replies: []Response{
		tool(ActGetOverview, `{}`),
		tool(ActAskUser, `{"question":"Which project for the cake?","options":["Work","Home"]}`),
		tool(ActMoveTasks, `{"moves":[{"task_id":"t2","project_name":"Home"}]}`),
		tool(ActFinalAnswer, `{"answer":"Moved."}`),
	}}
	e := New(s, m, Config{})
	out := e.Start(t.Context(), Input{Instruction: talkRequest}, Hooks{})
	if out.Status != StatusAsking || out.Transcript.Policy != PolicyMessage {
		t.Fatalf("outcome %s, policy %q", out.Status, out.Transcript.Policy)
	}
	raw, err := MarshalTranscript(out.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	saved, dropped := throughV1(t, raw)
	if !reflect.DeepEqual(dropped, []string{"policy"}) {
		t.Errorf("the previous build drops %v, want [policy] only", dropped)
	}
	back, err := UnmarshalTranscript(saved)
	if err != nil {
		t.Fatal(err)
	}
	if p := inferPolicy(back.Touch, back.Actions, false); p != PolicyMessage {
		t.Errorf("read back, the run is inferred %q, want message", p)
	}
	if out := e.Resume(t.Context(), back, "Home", Hooks{}); out.Status != StatusDone || out.Answer != "Moved." {
		t.Fatalf("resumed: %s %q (err %v)", out.Status, out.Answer, out.Err)
	}
}

// TestPreviousBuildRefusesWhatWouldWidenARun: a transcript holding a
// limit the previous build would drop (it knows no policy or earlier
// aliases) is saved as version 2, which it refuses, instead
// of running with fewer limits.
func TestPreviousBuildRefusesWhatWouldWidenARun(t *testing.T) {
	base := func() *Transcript {
		return &Transcript{V: TranscriptVersion, Protocol: ProtocolTools, Instruction: "file", Status: StatusInterrupted, Policy: PolicyMessage}
	}
	for _, c := range []struct {
		name string
		set  func(*Transcript)
		// lost is what version 1 would drop; "" when nothing is lost
		// but the policy read back would differ.
		lost string
	}{
		{"autopilot", func(tr *Transcript) { tr.Policy, tr.Touch = PolicyAutopilot, []string{"t1"} }, "policy"},
		{"digest", func(tr *Transcript) { tr.Policy = PolicyDigest }, "policy"},
		{"command", func(tr *Transcript) { tr.Policy, tr.Actions = PolicyCommand, TidyActions }, "policy"},
		{"earlier aliases", func(tr *Transcript) { tr.Known.Earlier = map[string]bool{"t2": true} }, "known.earlier"},
		{"message with the tidy's actions", func(tr *Transcript) { tr.Actions = TidyActions }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := base()
			c.set(tr)
			raw, err := MarshalTranscript(tr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeV1(raw); err == nil || !strings.Contains(err.Error(), "transcript version 2") {
				t.Fatalf("the previous build reads it (err %v)", err)
			}
			if c.lost != "" {
				// Were it version 1, the previous build would drop it.
				one := strings.Replace(string(raw), `"v":2`, `"v":1`, 1)
				if _, dropped := throughV1(t, []byte(one)); !strings.Contains(strings.Join(dropped, " "), c.lost) {
					t.Errorf("version 1 drops %v, want %s among them", dropped, c.lost)
				}
			}
			back, err := UnmarshalTranscript(raw)
			if err != nil {
				t.Fatal(err)
			}
			if tr.V = back.V; !reflect.DeepEqual(back, tr) {
				t.Errorf("read back:\n%+v\nwant\n%+v", back, tr)
			}
		})
	}
}

// TestTranscriptOfANewerBuildIsRefused: this build refuses a version it
// does not know with ErrTranscriptNewer (the caller leaves the run to a
// replica that reads it), and a version that never was with another
// error.
func TestTranscriptOfANewerBuildIsRefused(t *testing.T) {
	_, err := UnmarshalTranscript(fmt.Appendf(nil, `{"v":%d,"status":"asking","new_limit":{"x":1}}`, TranscriptVersion+1))
	if !errors.Is(err, ErrTranscriptNewer) {
		t.Errorf("newer version: err %v, want ErrTranscriptNewer", err)
	}
	for _, raw := range []string{`{"status":"asking"}`, `{"v":-1}`} {
		if _, err := UnmarshalTranscript([]byte(raw)); err == nil || errors.Is(err, ErrTranscriptNewer) {
			t.Errorf("%s: err %v, want a version error", raw, err)
		}
	}
	// Each version read is run as this one.
	tr, err := UnmarshalTranscript([]byte(`{"v":1,"status":"interrupted","elapsed":1000000000}`))
	if err != nil || tr.V != TranscriptVersion || tr.Elapsed != time.Second {
		t.Errorf("version 1: %+v, %v", tr, err)
	}
}
