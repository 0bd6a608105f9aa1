package slack_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/bot/outbound"
)

// newClockedAdapter is newAdapter with a clock the test moves (wait): the
// adapter's rate-limit lanes (limits.go) count on it.
func newClockedAdapter(t *testing.T) (*slack.Adapter, *slacktest.Server, func(time.Duration)) {
	t.Helper()
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	wait := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	a, err := slack.New(t.Context(), slack.Config{BotToken: slacktest.Token, SigningSecret: secret, APIURL: srv.URL, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return a, srv, wait
}

// TestThirtyAnswersStreamedAtOnce: 30 answers in one workspace, each
// made as the bot makes it through its send queue (a status message, a
// preview streamed while the model writes, the answer), run at once
// against the fake's per-method limits. Streams start while
// chat.startStream's and chat.stopStream's Tier 2 budget lasts and the
// rest are posted without a preview; appends over Tier 4 are answered
// 429 and dropped; a post in another conversation is not held back by
// any of it (one 429 used to pause every call to Slack for its
// Retry-After, here up to a minute); every answer is shown once.
func TestThirtyAnswersStreamedAtOnce(t *testing.T) {
	a, srv := newAdapter(t)
	quit := make(chan struct{})
	q := outbound.New("slack", slog.New(slog.DiscardHandler), quit)
	go q.Run(t.Context())
	t.Cleanup(func() { close(quit) })
	ctx := t.Context()
	answer := func(i int) string {
		return fmt.Sprintf("Answer %d: moved the cake task to Birthday and set it for Friday.", i)
	}
	var wg sync.WaitGroup
	var previews, skipped atomic.Int32
	// Once the first append is dropped (chat.appendStream is over Tier 4
	// for up to a minute), a post in another conversation goes at once.
	firstSkip := make(chan struct{})
	otherErr := make(chan error, 1)
	go func() {
		<-firstSkip
		m := bot.Outgoing{ChatID: "C9", Text: "Good morning: 3 tasks due today."}
		posted := make(chan error, 1)
		go func() {
			posted <- q.Do(ctx, m.ChatID, "send", func(ctx context.Context) error { _, err := a.Send(ctx, m); return err })
		}()
		select {
		case err := <-posted:
			otherErr <- err
		case <-time.After(10 * time.Second): // the limit's pause is up to a minute
			otherErr <- errors.New("still waiting after 10 s")
		}
	}()
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := bot.Outgoing{ChatID: fmt.Sprintf("D%02d", i), ThreadID: fmt.Sprintf("1.%06d", i), Text: "⏳ Working…"}
			if err := q.Do(ctx, m.ChatID, "send", func(ctx context.Context) error { _, err := a.Send(ctx, m); return err }); err != nil {
				t.Errorf("status in %s: %v", m.ChatID, err)
				return
			}
			var st bot.Stream
			if a.CanStream() {
				first := m
				first.Text = "Answer"
				_ = q.Do(ctx, m.ChatID, "start stream", func(ctx context.Context) error {
					var err error
					st, err = a.StartStream(ctx, first, "U1")
					return err
				})
			}
			m.Text, m.Ref = answer(i), fmt.Sprint("ob", i)
			if st != nil {
				previews.Add(1)
				words := strings.Fields(m.Text)
				for n := 2; n < len(words); n++ {
					done := make(chan struct{})
					q.PostDroppable(m.ChatID, "stream", func(ctx context.Context) error { return st.Update(ctx, strings.Join(words[:n], " ")) }, func(err error) {
						if errors.Is(err, outbound.ErrSkipped) && skipped.Add(1) == 1 {
							close(firstSkip)
						}
						close(done)
					})
					<-done
				}
				final := false
				err := q.Do(ctx, m.ChatID, "finish", func(ctx context.Context) error {
					var err error
					_, final, err = st.Finish(ctx, m)
					return err
				})
				if err != nil {
					t.Errorf("finish in %s: %v", m.ChatID, err)
				}
				if final {
					return
				}
			}
			if err := q.Do(ctx, m.ChatID, "send", func(ctx context.Context) error { _, err := a.Send(ctx, m); return err }); err != nil {
				t.Errorf("answer in %s: %v", m.ChatID, err)
			}
		}()
	}
	wg.Wait()
	if skipped.Load() == 0 {
		t.Fatalf("%d appends, none dropped: the test no longer crosses Tier 4", srv.Calls("chat.appendStream"))
	}
	if n := srv.Calls("chat.appendStream"); n > 100 {
		t.Errorf("%d appends reached Slack in a minute, over Tier 4's 100", n)
	}
	if err := <-otherErr; err != nil {
		t.Errorf("a post in another conversation while appends are limited: %v", err)
	}
	for _, method := range []string{"chat.startStream", "chat.stopStream", "chat.postMessage"} {
		if n := srv.Throttled(method); n != 0 {
			t.Errorf("%s refused %d times: its budget was exceeded", method, n)
		}
	}
	if n := previews.Load(); n == 0 || n > 20 {
		t.Errorf("%d answers streamed, want some and at most chat.startStream's 20 a minute", n)
	}
	for i := range 30 {
		shown := 0
		for _, p := range srv.Posts(fmt.Sprintf("D%02d", i)) {
			if p.Shown() == answer(i) {
				shown++
			}
		}
		if shown != 1 {
			t.Errorf("answer %d shown %d times, want once: %+v", i, shown, srv.Posts(fmt.Sprintf("D%02d", i)))
		}
	}
}
