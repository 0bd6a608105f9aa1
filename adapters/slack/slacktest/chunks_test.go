package slacktest

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

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
	start := s.Call(t, "chat.startStream", url.Values{"channel": {dm}, "thread_ts": {thread}, "chunks": {chunks("One")}})
	if start["ok"] != true {
		t.Fatalf("chat.startStream: %v", start)
	}
	ts := start["ts"].(string)
	if r := s.Call(t, "chat.appendStream", url.Values{"channel": {dm}, "ts": {ts}, "markdown_text": {", two"}, "chunks": {chunks(", three")}}); r["ok"] != true {
		t.Fatalf("chat.appendStream: %v", r)
	}
	stop := s.Call(t, "chat.stopStream", url.Values{"channel": {dm}, "ts": {ts}, "chunks": {chunks(", four.")}})
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
		r := s.Call(t, "chat.startStream", url.Values{"channel": {dm}, "thread_ts": {s.NextTS()}, "chunks": {raw}})
		if r["error"] != "invalid_chunks" {
			t.Errorf("chunks %s: %v, want invalid_chunks", raw, r)
		}
		s.Close()
	}
}
