package bot

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// TestRunOfANewerVersionIsLeftStored: during a rolling upgrade a run
// saved by a newer build (a transcript version this build does not
// read) is left as it is, for a replica that reads it: not resumed,
// not failed, nothing posted, and the answer that would resume it kept.
func TestRunOfANewerVersionIsLeftStored(t *testing.T) {
	newer := json.RawMessage(fmt.Sprintf(`{"v":%d,"status":"interrupted","limit_of_the_future":1}`, agent.TranscriptVersion+1))
	t.Run("restart", func(t *testing.T) {
		st := newMemStore()
		_ = st.SaveThread(t.Context(), Thread{Key: "telegram:c1:"})
		_ = st.SaveRun(t.Context(), &Run{ID: "r1", ThreadKey: "telegram:c1:", Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Status: RunWorking, Transcript: newer})
		ag := &mockAgent{}
		plat := newTelegram()
		b := New(st, ag, Config{})
		b.AddPlatform(plat)
		startUntilIdle(t, b)
		r1, _ := st.Run(t.Context(), "r1")
		if len(ag.resumed) != 0 || r1.Status != RunWorking || string(r1.Transcript) != string(newer) {
			t.Errorf("resumed %d, status %s, transcript %s", len(ag.resumed), r1.Status, r1.Transcript)
		}
		if got := plat.texts(); len(got) != 0 {
			t.Errorf("posted %q", got)
		}
	})
	t.Run("answer", func(t *testing.T) {
		ag := &mockAgent{}
		h := newHarness(t, ag)
		r := &Run{ID: "r2", ThreadKey: "telegram:c1:", Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Status: RunWaiting,
			Waiting: &Waiting{Kind: "ask", Question: "Which project?", Options: []string{"Home"}, Key: "k1", UserID: "42", MessageID: "q1"}, Transcript: newer}
		if err := h.store.SaveRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		h.handle(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Button: answerPrefix + "k1:0", ButtonRef: "q1", EventID: "press-home"})
		h.idle(t)
		got, _ := h.store.Run(t.Context(), "r2")
		if len(ag.resumed) != 0 || got.Status != RunWaiting || got.Reply != "" {
			t.Errorf("resumed %d, status %s, reply %q", len(ag.resumed), got.Status, got.Reply)
		}
		jobs, err := h.store.Jobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Incoming.Button == "" {
			t.Errorf("jobs %+v, want the press kept for a replica that reads the run", jobs)
		}
		if sent := strings.Join(h.plat.texts(), " | "); strings.Contains(sent, jobFailedText) {
			t.Errorf("posted %q", sent)
		}
	})
}
