package slacktest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestPublishViewRefusesAsSlackDoes: views.publish, called by slack-go
// (JSON), refuses a view beyond Block Kit's limits with
// invalid_arguments and says why in response_metadata.messages; a good
// one is kept as the person's Home.
func TestPublishViewRefusesAsSlackDoes(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	api := slack.New(slacktest.Token, slack.OptionAPIURL(srv.URL))
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	button := func(label, action string) slack.Block {
		return slack.NewActionBlock("b", slack.NewButtonBlockElement(action, "v", txt(label)))
	}
	var many []slack.Block
	for range 101 {
		many = append(many, slack.NewDividerBlock())
	}
	for _, c := range []struct {
		name, user, typ string
		blocks          []slack.Block
		want            string
	}{
		{"no user", "", "home", nil, "user_id"},
		{"not a home", "U1", "modal", nil, "must be 'home'"},
		{"101 blocks", "U1", "home", many, "no more than 100 items"},
		{"long section", "U1", "home", []slack.Block{slack.NewSectionBlock(txt(strings.Repeat("x", 3001)), nil, nil)}, "less than 3001 characters [json-pointer:/view/blocks/0/text/text]"},
		{"long button", "U1", "home", []slack.Block{button(strings.Repeat("x", 76), "a")}, "less than 76 characters"},
		{"long action_id", "U1", "home", []slack.Block{button("ok", strings.Repeat("a", 256))}, "/action_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs := rawPublish(t, srv, c.user, c.typ, c.blocks)
			if !strings.Contains(msgs, c.want) {
				t.Errorf("got %q; want invalid_arguments saying %q", msgs, c.want)
			}
			if c.user != "" && c.typ == "home" {
				_, err := api.PublishViewContext(t.Context(), slack.PublishViewContextRequest{UserID: c.user, View: slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: c.blocks}}})
				var se slack.SlackErrorResponse
				if !errors.As(err, &se) || se.Err != "invalid_arguments" || !strings.Contains(strings.Join(se.ResponseMetadata.Messages, "\n"), c.want) {
					t.Errorf("slack-go: %v (%+v)", err, se.ResponseMetadata)
				}
			}
		})
	}
	if _, err := api.PublishViewContext(t.Context(), slack.PublishViewContextRequest{UserID: "U1", View: slack.HomeTabViewRequest{Type: slack.VTHomeTab,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(txt("Autopilot: off"), nil, nil), button("Turn autopilot on", "a")}}}}); err != nil {
		t.Fatal(err)
	}
	h, ok := srv.HomeOf("U1")
	if !ok || h.Shown() != "Autopilot: off" || len(h.Labels) != 1 || h.Labels[0] != "Turn autopilot on" || h.Publishes != 1 {
		t.Errorf("home %+v", h)
	}
}

// rawPublish posts views.publish as JSON and returns its error and
// messages ("" for ok).
func rawPublish(t *testing.T, srv *slacktest.Server, user, typ string, blocks []slack.Block) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"user_id": user, "view": map[string]any{"type": typ, "blocks": blocks}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"views.publish", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+slacktest.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		OK       bool   `json:"ok"`
		Error    string `json:"error"`
		Metadata struct {
			Messages []string `json:"messages"`
		} `json:"response_metadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.OK {
		return ""
	}
	return out.Error + ": " + strings.Join(out.Metadata.Messages, "\n")
}

// TestPublishViewTooLargeAndTier4: a view over 250kb is view_too_large,
// and views.publish, Tier 4, answers 429 past 100 calls in a minute
// (docs.slack.dev/reference/methods/views.publish).
func TestPublishViewTooLargeAndTier4(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	big := []slack.Block{}
	for range 90 {
		big = append(big, slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("x", 2900), false, false), nil, nil))
	}
	if got := rawPublish(t, srv, "U1", "home", big); !strings.HasPrefix(got, "view_too_large") {
		t.Errorf("a 260kb view: %q, want view_too_large", got)
	}
	api := slack.New(slacktest.Token, slack.OptionAPIURL(srv.URL))
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewDividerBlock()}}}
	for i := 1; i < 100; i++ { // the refused call above counted too
		if _, err := api.PublishViewContext(t.Context(), slack.PublishViewContextRequest{UserID: "U1", View: view}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := api.PublishViewContext(t.Context(), slack.PublishViewContextRequest{UserID: "U1", View: view})
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || srv.Throttled("views.publish") != 1 {
		t.Errorf("the 101st call of the minute: %v, throttled %d; want 429", err, srv.Throttled("views.publish"))
	}
}
