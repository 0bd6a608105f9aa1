package slack_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

// The fake keeps a post's metadata and returns it from
// conversations.history and conversations.replies only when asked with
// include_all_metadata, as Slack does.
func TestFakeReturnsMetadataOnlyWhenAsked(t *testing.T) {
	srv := slacktest.New()
	defer srv.Close()
	meta := `{"event_type":"tidybot_outbox","event_payload":{"outbox_id":"ob1"}}`
	top := srv.Call(t, "chat.postMessage", url.Values{"channel": {"D1"}, "text": {"top"}, "metadata": {meta}})
	ts, _ := top["ts"].(string)
	if top["ok"] != true || ts == "" {
		t.Fatalf("post: %v", top)
	}
	if r := srv.Call(t, "chat.postMessage", url.Values{"channel": {"D1"}, "text": {"in thread"}, "thread_ts": {ts}, "metadata": {meta}}); r["ok"] != true {
		t.Fatalf("reply: %v", r)
	}
	if r := srv.Call(t, "chat.postMessage", url.Values{"channel": {"D1"}, "text": {"x"}, "metadata": {`{"event_payload":{}}`}}); r["error"] != "invalid_metadata_format" {
		t.Errorf("metadata without event_type: %v, want invalid_metadata_format", r)
	}
	metas := func(r map[string]any) (n, withMeta int) {
		ms, _ := r["messages"].([]any)
		for _, m := range ms {
			n++
			if md, ok := m.(map[string]any)["metadata"].(map[string]any); ok && md["event_type"] == "tidybot_outbox" {
				withMeta++
			}
		}
		return n, withMeta
	}
	for _, tc := range []struct {
		method       string
		form         url.Values
		n, wantMetas int
	}{
		{"conversations.history", url.Values{"channel": {"D1"}}, 1, 0},
		{"conversations.history", url.Values{"channel": {"D1"}, "include_all_metadata": {"1"}}, 1, 1},
		{"conversations.replies", url.Values{"channel": {"D1"}, "ts": {ts}}, 2, 0},
		{"conversations.replies", url.Values{"channel": {"D1"}, "ts": {ts}, "include_all_metadata": {"true"}}, 2, 2},
	} {
		r := srv.Call(t, tc.method, tc.form)
		if n, m := metas(r); r["ok"] != true || n != tc.n || m != tc.wantMetas {
			t.Errorf("%s %v: %d messages, %d with metadata; want %d, %d (%v)", tc.method, tc.form, n, m, tc.n, tc.wantMetas, r)
		}
	}
	if r := srv.Call(t, "conversations.replies", url.Values{"channel": {"D1"}, "ts": {"1.000001"}}); r["error"] != "thread_not_found" {
		t.Errorf("replies of no message: %v", r)
	}
	srv.NotMember("C9")
	if r := srv.Call(t, "conversations.history", url.Values{"channel": {"C9"}}); r["error"] != "not_in_channel" {
		t.Errorf("history where the bot is not a member: %v", r)
	}
}

// Resend finds an outbox entry posted before (top level or in a thread,
// by the metadata Send tagged it with) and posts nothing; it posts an
// entry that is not there, and of a long text only the parts missing.
func TestResendPostsAnEntryOnce(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	since := time.Now()
	for _, m := range []bot.Outgoing{
		{ChatID: "D1", Text: "Done: moved 3 tasks.", Ref: "ob1"},
		{ChatID: "C1", ThreadID: "2.2", Text: "Done in the thread.", Ref: "ob2"},
	} {
		ts, err := a.Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		before := len(srv.Posts(m.ChatID))
		again, err := a.Resend(ctx, m, since)
		if err != nil {
			t.Fatal(err)
		}
		if again != ts || len(srv.Posts(m.ChatID)) != before {
			t.Errorf("%s: Resend gave %q and %d posts, want the first post %q and %d", m.Ref, again, len(srv.Posts(m.ChatID)), ts, before)
		}
	}

	fresh := bot.Outgoing{ChatID: "D1", Text: "Never posted.", Ref: "ob3"}
	if _, err := a.Resend(ctx, fresh, since); err != nil {
		t.Fatal(err)
	}
	if p := lastPostOf(srv, "D1"); p.Text != "Never posted." || p.Metadata == nil || p.Metadata.EventPayload["outbox_id"] != "ob3" {
		t.Errorf("the missing entry: %+v", p)
	}

	// A long answer is two posts; a crash after the first leaves only it.
	long := bot.Outgoing{ChatID: "D2", Text: strings.Repeat("word ", 3000), Ref: "ob4"}
	if _, err := a.Send(ctx, long); err != nil {
		t.Fatal(err)
	}
	parts := srv.Posts("D2")
	if len(parts) != 2 {
		t.Fatalf("a long text in %d posts, want 2", len(parts))
	}
	first := parts[0]
	meta, _ := json.Marshal(first.Metadata)
	if r := srv.Call(t, "chat.postMessage", url.Values{"channel": {"D3"}, "text": {first.Text}, "metadata": {string(meta)}}); r["ok"] != true {
		t.Fatal(r)
	}
	long.ChatID = "D3"
	ts, err := a.Resend(ctx, long, since)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Posts("D3")
	if len(got) != 2 || got[1].Text != parts[1].Text || got[1].TS != ts {
		t.Errorf("after one part of two was posted, Resend left %d posts (last %q), want the second part once", len(got), ts)
	}
}

// Where the bot cannot read the conversation back, Resend posts: at
// least once rather than never.
func TestResendWhereItCannotLookPosts(t *testing.T) {
	a, srv := newAdapter(t)
	m := bot.Outgoing{ChatID: "C1", ThreadID: "9.9", Text: "In a thread the fake never saw.", Ref: "ob5"}
	if _, err := a.Resend(t.Context(), m, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Posts("C1")); n != 1 {
		t.Errorf("%d posts, want 1", n)
	}
}

func lastPostOf(srv *slacktest.Server, channel string) slacktest.Posted {
	ps := srv.Posts(channel)
	if len(ps) == 0 {
		return slacktest.Posted{}
	}
	return ps[len(ps)-1]
}
