package slack_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

// TestStreamInADM streams an answer into a DM: started with the first
// words, appended, stopped with the rest, the Undo button and the
// outbox tag; a Resend of the same entry (a crash between the stop and
// its record) finds the message and posts nothing.
func TestStreamInADM(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved three"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "Moved three tasks to"); err != nil {
		t.Fatal(err)
	}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved three tasks to Family.", Ref: "ob1",
		Buttons: []bot.Button{{Label: "Undo", Data: "undo:r1", Command: "undo"}}}
	id, ok, err := st.Finish(ctx, final)
	if err != nil || !ok || id == "" {
		t.Fatalf("finish: %q %v %v", id, ok, err)
	}
	ss := srv.Streams("D1")
	if len(ss) != 1 || ss[0].Open || ss[0].Appends != 1 || len(ss[0].Chunks) != 3 || ss[0].TS != id {
		t.Fatalf("streams %+v", ss)
	}
	posts := srv.Posts("D1")
	if len(posts) != 1 || posts[0].Text != final.Text || len(posts[0].Buttons) != 1 || posts[0].Buttons[0] != "undo:r1" || posts[0].Metadata == nil {
		t.Fatalf("posts %+v", posts)
	}
	again, err := a.Resend(ctx, final, time.Now())
	if err != nil || again != id {
		t.Errorf("resend: %q %v, want the streamed message %q", again, err, id)
	}
	if n := len(srv.Posts("D1")); n != 1 {
		t.Errorf("%d posts after the resend, want 1", n)
	}
}

// TestStreamCrashBeforeStop: a process that died before stopping the
// stream left no tagged message; the restart's Resend posts the answer,
// once.
func TestStreamCrashBeforeStop(t *testing.T) {
	a, srv := newAdapter(t)
	if _, err := a.StartStream(t.Context(), bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved"}, "U1"); err != nil {
		t.Fatal(err)
	}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved it.", Ref: "ob2"}
	if _, err := a.Resend(t.Context(), final, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resend(t.Context(), final, time.Now()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range srv.Posts("D1") {
		if p.Text == final.Text {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the answer was posted %d times, want 1", n)
	}
}

// TestStreamRules: the fake's documented refusals reach the adapter as
// errors: a workspace without streaming, a channel stream without its
// recipient (the adapter always sends one), a stopped stream.
func TestStreamRules(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", Text: "Hi"}, "U1")
	if err != nil {
		t.Fatalf("a channel stream with its recipient: %v", err)
	}
	if ss := srv.Streams("C1"); len(ss) != 1 || ss[0].RecipientUser != "U1" || ss[0].RecipientTeam != "T1" {
		t.Errorf("streams %+v", ss)
	}
	if _, _, err := st.Finish(ctx, bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", Text: "Hi."}); err != nil {
		t.Fatal(err)
	}
	var se goslack.SlackErrorResponse
	if err := st.Update(ctx, "Hi. And"); !errors.As(err, &se) || se.Err != "message_not_in_streaming_state" {
		t.Errorf("append after stop: %v", err)
	}
	srv.RefuseStreams("unknown_method")
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Hi"}, "U1"); !errors.As(err, &se) || se.Err != "unknown_method" {
		t.Errorf("a workspace without streams: %v", err)
	}
}

// TestStreamAnswerStartedOver: an answer that does not extend what was
// streamed (the model started over, "I deleted the three old…" becoming
// "Sorry, nothing was deleted.") never becomes the stream: the stream
// is stopped untagged and deleted (final false) and the bot posts the
// answer; a Resend then posts it, once (issue 33: the stream was tagged
// as the answer before the chat.update that put the answer in it
// failed, and Resend found the withdrawn claim and posted nothing).
func TestStreamAnswerStartedOver(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "I deleted the three old"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Sorry, nothing was deleted.", Ref: "ob3"}
	id, ok, err := st.Finish(ctx, final)
	if err != nil || ok || id != "" {
		t.Fatalf("finish: %q %v %v, want the stream given up", id, ok, err)
	}
	if ss := srv.Streams("D1"); len(ss) != 1 || ss[0].Open || !ss[0].Deleted {
		t.Fatalf("streams %+v, want one, stopped and deleted", ss)
	}
	if _, err := a.Resend(ctx, final, time.Now()); err != nil {
		t.Fatal(err)
	}
	posts := srv.Posts("D1")
	if len(posts) != 1 || posts[0].Shown() != final.Text || posts[0].Metadata == nil {
		t.Errorf("posts %+v, want the answer alone", posts)
	}
}

// TestStreamDeletedByItsID: a stream a dead process left is deleted by
// the id the bot recorded (bot.LastingStream): gone from the
// conversation, its stream ended (message_not_found), a second delete
// no error; the fake's documented errors reach the caller.
func TestStreamDeletedByItsID(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Added:"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	orphan := st.(bot.LastingStream).MessageID()
	if ss := srv.Streams("D1"); len(ss) != 1 || ss[0].TS != orphan {
		t.Fatalf("streams %+v, want the one of id %s", ss, orphan)
	}
	for range 2 {
		if err := a.DeleteMessage(ctx, "D1", orphan); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if n := srv.Deleted(); n != 1 {
		t.Errorf("%d deleted, want 1", n)
	}
	for _, p := range srv.Posts("D1") {
		if p.TS == orphan {
			t.Errorf("the deleted stream is still posted: %+v", p)
		}
	}
	if ss := srv.Streams("D1"); ss[0].Open || !ss[0].Deleted {
		t.Errorf("stream %+v, want deleted", ss[0])
	}
	var se goslack.SlackErrorResponse
	if err := st.Update(ctx, "Added: milk"); !errors.As(err, &se) || se.Err != "message_not_found" {
		t.Errorf("append to a deleted stream: %v", err)
	}
	if got := srv.Call(t, "chat.delete", url.Values{"ts": {orphan}}); got["error"] != "channel_not_found" {
		t.Errorf("chat.delete without a channel: %v", got)
	}
}

// TestStreamFinishRetriedAfterRateLimit: the send queue makes a call
// again after its bot.RateLimited error. An answer that started over
// stops the stream and deletes it; a 429 on that delete comes back as
// bot.RateLimited, and the queue's second Finish must delete it, not
// stop the stopped stream again (message_not_in_streaming_state).
func TestStreamFinishRetriedAfterRateLimit(t *testing.T) {
	a, srv, wait := newClockedAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved three"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Sorry, nothing was moved.", Ref: "ob4"}
	srv.RateLimit("chat.delete", 1)
	var rl bot.RateLimited
	if _, _, err := st.Finish(ctx, final); !errors.As(err, &rl) {
		t.Fatalf("finish with chat.delete limited: err = %v, want a bot.RateLimited", err)
	}
	wait(time.Second) // the send queue retries after Retry-After
	if _, ok, err := st.Finish(ctx, final); err != nil || ok {
		t.Fatalf("finish again: %v %v", ok, err)
	}
	if ss := srv.Streams("D1"); len(ss) != 1 || !ss[0].Deleted {
		t.Errorf("streams %+v, want the one deleted", ss)
	}
	if n := srv.Calls("chat.stopStream"); n != 1 {
		t.Errorf("chat.stopStream called %d times, want 1", n)
	}
}

// TestStreamKeepsTheDetailsLink: in a DM the Details link is a button
// on the answer (as Send puts it), with the feedback buttons, below the
// streamed text.
func TestStreamKeepsTheDetailsLink(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved three"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	link := &bot.Link{Label: "Details", URL: "https://bot.example.com/runs/r1?sig=s", UserID: "U1"}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Moved three tasks.", Ref: "ob5", Link: link,
		Buttons: []bot.Button{{Label: "👍", Data: "fb:r1:good", Feedback: bot.FeedbackGood}, {Label: "👎", Data: "fb:r1:bad", Feedback: bot.FeedbackBad}}}
	if _, ok, err := st.Finish(ctx, final); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	posts := srv.Posts("D1")
	if len(posts) != 1 || posts[0].Shown() != final.Text {
		t.Fatalf("posts %+v", posts)
	}
	if p := posts[0]; len(p.URLs) != 1 || p.URLs[0] != link.URL {
		t.Errorf("link buttons %q, want the Details link", p.URLs)
	}
	if p := posts[0]; len(p.Feedback) != 2 {
		t.Errorf("feedback %q, want the pair", p.Feedback)
	}
}

// TestStreamEndedWithoutAnswerIsRemoved: a run that ends without an
// answer (it asks a question, is stopped, fails) ends its preview with
// an empty Finish. The half-written answer must not stay in the chat
// beside what the run says instead (a Telegram draft vanishes by
// itself): the stream is stopped and its message deleted, and a Finish
// the send queue makes again after a 429 on the delete neither stops
// it twice nor fails.
func TestStreamEndedWithoutAnswerIsRemoved(t *testing.T) {
	a, srv, wait := newClockedAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "I moved three"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "I moved three tasks to"); err != nil {
		t.Fatal(err)
	}
	srv.RateLimit("chat.delete", 1)
	var rl bot.RateLimited
	if _, _, err := st.Finish(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001"}); !errors.As(err, &rl) {
		t.Fatalf("finish with chat.delete limited: err = %v, want a bot.RateLimited", err)
	}
	wait(time.Second) // the send queue retries after Retry-After
	id, final, err := st.Finish(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001"})
	if err != nil || final || id != "" {
		t.Fatalf("finish again: %q %v %v", id, final, err)
	}
	if ps := srv.Posts("D1"); len(ps) != 0 {
		t.Errorf("posts %+v: the half answer stayed", ps)
	}
	if ss := srv.Streams("D1"); len(ss) != 1 || ss[0].Open || !ss[0].Deleted {
		t.Errorf("streams %+v, want one, stopped and deleted", ss)
	}
	if n := srv.Calls("chat.stopStream"); n != 1 {
		t.Errorf("chat.stopStream called %d times, want 1", n)
	}
}

// TestStreamKeepsTheChannelLink: in a channel the Details link goes to
// the asker alone after the answer (chat.postEphemeral).
func TestStreamKeepsTheChannelLink(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", Text: "Moved three"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	link := &bot.Link{Label: "Details", URL: "https://bot.example.com/runs/r1?sig=s", UserID: "U1"}
	final := bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", Text: "Moved three tasks.", Ref: "ob6", Link: link}
	if _, ok, err := st.Finish(ctx, final); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	n := 0
	for _, p := range srv.Posts("C1") {
		if p.Ephemeral && p.User == "U1" && len(p.URLs) == 1 && p.URLs[0] == link.URL {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d ephemeral Details links, want 1; posts %+v", n, srv.Posts("C1"))
	}
}

// TestNoStreamOutsideAThread: in a DM Slack streams only replies in a
// thread, so a top-level DM answer opens no stream: the bot is told so
// without a call (StreamsIn), and StartStream refuses without calling
// Slack. A channel streams at the top level too.
func TestNoStreamOutsideAThread(t *testing.T) {
	a, srv := newAdapter(t)
	if a.StreamsIn("D1", "") || !a.StreamsIn("D1", "1.000001") || !a.StreamsIn("C1", "1.000001") || !a.StreamsIn("C1", "") {
		t.Errorf("StreamsIn: want DM threads and channels")
	}
	if _, err := a.StartStream(t.Context(), bot.Outgoing{ChatID: "D1", Text: "Moved"}, "U1"); err == nil {
		t.Fatal("a stream opened outside a thread")
	}
	if ss := srv.Streams("D1"); len(ss) != 0 {
		t.Errorf("streams %+v, want none", ss)
	}
	// The fake refuses one as Slack does (invalid_arguments).
	if got := srv.Call(t, "chat.startStream", url.Values{"channel": {"D1"}, "markdown_text": {"Moved"}}); got["error"] != "invalid_arguments" {
		t.Errorf("chat.startStream without thread_ts: %v", got)
	}
}

// TestUnfinishedKeepsOtherReplies: a reply the bot posted beside a run
// (/cancel's "Stopping…", carrying no outbox entry) and a tagged answer
// are not taken for a preview a dead process left: only the stream is
// (the bot asks only in a DM: bot.OrphanFinder).
func TestUnfinishedKeepsOtherReplies(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	const thread = "1.000001"
	status, err := a.Send(ctx, bot.Outgoing{ChatID: "D1", ThreadID: thread, Text: "🤔 Working on it…"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: thread, Text: "Added:"}, "U1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "D1", ThreadID: thread, Text: "Stopping at the next step…"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "D1", ThreadID: thread, Text: "A tagged answer.", Ref: "ob1"}); err != nil {
		t.Fatal(err)
	}
	ids, err := a.Unfinished(ctx, "D1", thread, status, time.Time{})
	if orphan := srv.Streams("D1")[0].TS; err != nil || len(ids) != 1 || ids[0] != orphan {
		t.Fatalf("unfinished %q %v, want only the stream %s", ids, err, orphan)
	}
}

// TestStreamRecipientTeam: chat.startStream's recipient_team_id is the
// team of the person the stream answers (the sender's own, another
// organisation's in Slack Connect), the workspace's only when the run
// does not know it; outside a DM the fake answers Slack's
// missing_recipient_user_id and missing_recipient_team_id, and streams
// at the top level of a channel (thread_ts optional there).
func TestStreamRecipientTeam(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", UserID: "U9", TeamID: "T9", Text: "Hi"}, "U9"); err != nil {
		t.Fatalf("a Slack Connect guest's stream: %v", err)
	}
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "C1", Text: "Hi"}, "U1"); err != nil {
		t.Fatalf("a top-level channel stream: %v", err)
	}
	ss := srv.Streams("C1")
	if len(ss) != 2 || ss[0].RecipientUser != "U9" || ss[0].RecipientTeam != "T9" || ss[1].RecipientTeam != "T1" {
		t.Errorf("streams %+v: want the sender's team T9, then the workspace's T1 for a run without one", ss)
	}
	if ps := srv.Posts("C1"); len(ps) != 2 || ps[1].ThreadTS != "" {
		t.Errorf("posts %+v: want the second stream at the top level", ps)
	}
	for _, tt := range []struct {
		args url.Values
		want string
	}{
		{url.Values{"channel": {"C1"}, "markdown_text": {"Hi"}, "recipient_team_id": {"T1"}}, "missing_recipient_user_id"},
		{url.Values{"channel": {"C1"}, "markdown_text": {"Hi"}, "recipient_user_id": {"U1"}}, "missing_recipient_team_id"},
		{url.Values{"channel": {"D1"}, "markdown_text": {"Hi"}}, "invalid_arguments"},
	} {
		if got := srv.Call(t, "chat.startStream", tt.args); got["error"] != tt.want {
			t.Errorf("chat.startStream %v: %v, want %s", tt.args, got, tt.want)
		}
	}
}
