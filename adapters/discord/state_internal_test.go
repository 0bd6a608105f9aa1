package discord

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// What the adapter learns of channels stays bounded however many it
// sees: a bot in busy servers learns a thread, a plain channel or a DM
// per conversation, for as long as it runs.
func TestLearntChannelsStayBounded(t *testing.T) {
	a := bareAdapter(nil)
	for i := range 5000 {
		id := strconv.Itoa(i)
		a.learnThread("t"+id, "c")
		a.learnDM("d"+id, "u"+id)
		a.learnChannel(&wireChannel{ID: "p" + id, Type: new(discordgo.ChannelTypeGuildText)})
	}
	for name, n := range map[string]int{"threads": len(a.threads), "dms": len(a.dms), "plain": len(a.plain)} {
		if n > 1001 {
			t.Errorf("%s holds %d entries, want at most 1001", name, n)
		}
	}
}

// A message answering an interaction is edited through its token for
// the token's 15 minutes by the adapter's clock (Config.Now), the clock
// that set its expiry; after that, through its channel.
func TestTokenLifetimeByConfiguredClock(t *testing.T) {
	now := time.Now()
	a := bareAdapter(nil)
	a.cfg.Now = func() time.Time { return now }
	a.keepToken("m1", interactionHook{appID: "app", token: "tok", expires: now.Add(hookFor)})
	if _, ok := a.tokenOf("m1"); !ok {
		t.Fatal("a fresh token is not found")
	}
	if !a.firstTime("i1") || a.firstTime("i1") {
		t.Fatal("an interaction is not remembered as seen")
	}
	now = now.Add(hookFor + time.Minute)
	if _, ok := a.tokenOf("m1"); ok {
		t.Error("a token past its 15 minutes by Config.Now still edits")
	}
	if !a.firstTime("i1") {
		t.Error("an interaction seen more than 15 minutes ago by Config.Now is still remembered")
	}
}

// roundTrip is an http.RoundTripper from a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A follow-up's bucket is the one discordgo's rate limiter counts it in
// (restapi.go, webhookExecute: its URI with ?wait=true): after a
// follow-up Discord answers with its bucket spent, the adapter sees the
// wait (spent) instead of letting discordgo sleep inside the next call.
func TestFollowupBucketIsDiscordgos(t *testing.T) {
	s, err := discordgo.New("Bot x")
	if err != nil {
		t.Fatal(err)
	}
	s.Client = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", "5")
		return &http.Response{StatusCode: 200, Header: h, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"id":"5","channel_id":"1"}`))}, nil
	})}
	a := bareAdapter(s)
	a.sess = s
	h := interactionHook{appID: "app", token: "tok"}
	if _, err := s.FollowupMessageCreate(&discordgo.Interaction{AppID: h.appID, Token: h.token}, true,
		&discordgo.WebhookParams{Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if got := a.spent(followups(h)); got <= 0 {
		t.Errorf("spent(followups) = %v after a follow-up that spent its bucket, want > 0", got)
	}
}
