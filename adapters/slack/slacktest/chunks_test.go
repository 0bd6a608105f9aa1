package slacktest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// callForm posts a Web API method as @slack/web-api does (form-encoded,
// arrays as JSON text) and returns the answer.
func callForm(t *testing.T, s *Server, method string, args url.Values) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+method, strings.NewReader(args.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStreamChunksAreTheMessagesText(t *testing.T) {
	s := New()
	defer s.Close()
	dm := s.IM("U1")
	thread := s.NextTS()
	chunks := func(texts ...string) string {
		var cs []map[string]string
		for _, x := range texts {
			cs = append(cs, map[string]string{"type": "markdown_text", "text": x})
		}
		cs = append(cs, map[string]string{"type": "plan_update", "title": "Tidying"})
		b, _ := json.Marshal(cs)
		return string(b)
	}
	start := callForm(t, s, "chat.startStream", url.Values{"channel": {dm}, "thread_ts": {thread}, "chunks": {chunks("One")}})
	if start["ok"] != true {
		t.Fatalf("chat.startStream: %v", start)
	}
	ts := start["ts"].(string)
	if r := callForm(t, s, "chat.appendStream", url.Values{"channel": {dm}, "ts": {ts}, "markdown_text": {", two"}, "chunks": {chunks(", three")}}); r["ok"] != true {
		t.Fatalf("chat.appendStream: %v", r)
	}
	stop := callForm(t, s, "chat.stopStream", url.Values{"channel": {dm}, "ts": {ts}, "chunks": {chunks(", four.")}})
	msg, _ := stop["message"].(map[string]any)
	if stop["ok"] != true || msg["text"] != "One, two, three, four." {
		t.Fatalf("chat.stopStream: %v, want the message \"One, two, three, four.\"", stop)
	}
	got := s.Streams(dm)
	if len(got) != 1 || strings.Join(got[0].Chunks, "|") != "One|, two, three|, four." {
		t.Fatalf("streams %+v", got)
	}
}

func TestInvalidStreamChunks(t *testing.T) {
	for _, raw := range []string{
		`{"type":"markdown_text","text":"not an array"}`,
		`[{"type":"markdown_text"}]`,
		`[{"type":"emoji","text":"?"}]`,
		`[not json`,
	} {
		s := New()
		dm := s.IM("U1")
		r := callForm(t, s, "chat.startStream", url.Values{"channel": {dm}, "thread_ts": {s.NextTS()}, "chunks": {raw}})
		if r["error"] != "invalid_chunks" {
			t.Errorf("chunks %s: %v, want invalid_chunks", raw, r)
		}
		s.Close()
	}
}
