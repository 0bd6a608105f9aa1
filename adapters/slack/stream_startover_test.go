package slack_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStartedOverAnswerShownOnceWhenUpdatesFail: the model streamed "I
// deleted the three old" and then started over; the answer says nothing
// was deleted. Slack answers chat.update with a 500 (the send queue
// retries only 429s). The bot finishes the stream with the answer and,
// when that fails or the stream gives way, posts the entry the way a
// restart posts it (Resend, looked for first). The chat must show the
// answer, once, and not the withdrawn claim (issue 33 defect 2: the
// stream was tagged as the answer before chat.update put the answer in
// it, so Resend found the claim and posted nothing).
func TestStartedOverAnswerShownOnceWhenUpdatesFail(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	var failed atomic.Bool
	hc := &http.Client{Timeout: 10 * time.Second, Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/chat.update") && failed.CompareAndSwap(false, true) {
			return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
				Body: io.NopCloser(strings.NewReader("oops")), Header: http.Header{}, Request: r}, nil
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const claim = "I deleted the three old"
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: claim}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	final := bot.Outgoing{ChatID: "D1", ThreadID: "1.000001", Text: "Sorry, nothing was deleted.", Ref: "ob-review"}
	if _, ok, err := st.Finish(ctx, final); err != nil || !ok {
		if _, err := a.Resend(ctx, final, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var shown []string
	answers := 0
	for _, p := range srv.Posts("D1") {
		shown = append(shown, p.Shown())
		if p.Shown() == final.Text {
			answers++
		}
		if strings.Contains(p.Shown(), claim) {
			t.Errorf("the withdrawn claim %q is still shown", p.Shown())
		}
	}
	if answers != 1 {
		t.Errorf("the answer %q is shown %d times, want once; the chat shows %q", final.Text, answers, shown)
	}
}

// TestStreamEscapedAsPosted: streamed text is escaped exactly as posted
// text is (& < >: api.slack.com/reference/surfaces/formatting#escaping),
// so a task named "<!channel>", an "<!everyone>", an "<@U2>" or a
// "<https://…|…>" link in an answer reaches the channel as text, not as
// a mention or a link (issue 33 defect 6).
func TestStreamEscapedAsPosted(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	const thread = "1.000001"
	text := "Moved <!channel> & <!everyone> with <@U2> and <https://evil.example|click> to Home."
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "C1", ThreadID: thread, Text: text}); err != nil {
		t.Fatal(err)
	}
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "C2", ThreadID: thread, Text: "Moved <!channel>"}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "Moved <!channel> & <!everyone> with <@U2>"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Finish(ctx, bot.Outgoing{ChatID: "C2", ThreadID: thread, Text: text, Ref: "ob7"}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	posted := srv.Posts("C1")[0].Text
	ss := srv.Streams("C2")
	if len(ss) != 1 {
		t.Fatalf("streams %+v", ss)
	}
	streamed := strings.Join(ss[0].Chunks, "")
	if streamed != posted {
		t.Errorf("streamed %q, posted %q: want the same escaping", streamed, posted)
	}
	for _, raw := range []string{"<!channel>", "<!everyone>", "<@U2>", "<https://"} {
		if strings.Contains(streamed, raw) {
			t.Errorf("streamed %q carries %s unescaped", streamed, raw)
		}
	}
}
