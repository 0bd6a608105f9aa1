package main

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// detailsURL is the Details button's address on m, or "".
func detailsURL(m telegramtest.Sent) string {
	for i, u := range m.URLs {
		if u != "" && m.Labels[i] == "Details" {
			return u
		}
	}
	return ""
}

// runsCmd runs `tidybot runs args…` with e's config and returns stdout.
func runsCmd(t *testing.T, e *env, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Args: append([]string{"runs"}, args...), Config: &e.cfg, Stdout: &out, Stderr: &errOut}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("runs %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

func TestServeRunInspector(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	e.cfg.PublicURL = "https://bot.example.com"
	e.cfg.RunLinkTTL = time.Hour
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	base := serve(t, e)

	// A run with a gated write: the question has no link, the answer does.
	tg.PushText(42, 42, "delete the cake task")
	var question telegramtest.Sent
	waitFor(t, "the confirmation", func() bool {
		ms := tg.Messages(42)
		if len(ms) == 0 {
			return false
		}
		question = ms[len(ms)-1]
		return len(question.Buttons) == 2
	})
	if detailsURL(question) != "" {
		t.Errorf("the confirmation carries a Details link: %+v", question)
	}
	tg.PushCallback(42, 42, question.MessageID, question.Buttons[0])
	waitFor(t, "the deletion", func() bool { return lastText(tg, 42) == "Deleted the cake task." })
	final := tg.Messages(42)[len(tg.Messages(42))-1]
	link := detailsURL(final)
	if !strings.HasPrefix(link, "https://bot.example.com/runs/") {
		t.Fatalf("the final message has no Details link: %+v", final)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	runID := strings.TrimPrefix(u.Path, "/runs/")

	// The page, on serve's own address.
	code, page := get(t, base+u.Path+"?"+u.RawQuery)
	if code != 200 {
		t.Fatalf("GET the run page: HTTP %d\n%s", code, page)
	}
	mustContain(t, page, "delete the cake task", "Deleted the cake task.", "delete_tasks", "badge write", "tokens", "<svg", "waited")
	if code, _ := get(t, base+u.Path+"?sig=1."+strings.Repeat("A", 43)); code != 404 {
		t.Errorf("a forged signature: HTTP %d, want 404", code)
	}
	if code, _ := get(t, base+u.Path); code != 404 {
		t.Errorf("no signature: HTTP %d, want 404", code)
	}

	// In a group, the answer has no link; the asker gets it privately.
	before := len(tg.Messages(42))
	tg.PrivacyOff() // the mention reaches the bot
	tg.PushText(-100, 42, "@tidybot what's due today?")
	waitFor(t, "the answer in the group", func() bool { return lastText(tg, -100) == "You said: what's due today?" })
	for _, m := range tg.Messages(-100) {
		if detailsURL(m) != "" {
			t.Errorf("a message in the group carries the link: %+v", m)
		}
	}
	waitFor(t, "the private link", func() bool { return len(tg.Messages(42)) > before })
	if private := tg.Messages(42)[before]; detailsURL(private) == "" {
		t.Errorf("the asker got no private link: %+v", private)
	}

	// The terminal, while serve holds the database.
	list := runsCmd(t, e)
	mustContain(t, list, "ID", "CONVERSATION", "STATUS", "STEPS", "TOKENS", "AGE", runID, "telegram:42 ")
	show := runsCmd(t, e, "show", runID)
	mustContain(t, show, "Run "+runID, "Asked:  delete the cake task", "Timeline", "Step 1", "delete_tasks [write]", "waited")
}

func TestServeWithoutPublicURLHasNoLinkButRunsWork(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "what's due today?")
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == "You said: what's due today?" })
	for _, m := range tg.Messages(42) {
		if len(m.URLs) > 0 && detailsURL(m) != "" {
			t.Errorf("a link without TIDYBOT_PUBLIC_URL: %+v", m)
		}
	}
	list := runsCmd(t, e)
	mustContain(t, list, "telegram:42 ", "done")
	// The page is still served; runs link makes an address on serve's own.
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	link := strings.TrimSpace(runsCmd(t, e, "link", id))
	if !strings.HasPrefix(link, "http://"+e.cfg.HTTPAddr+"/runs/"+id+"?sig=") {
		t.Fatalf("runs link = %q", link)
	}
	if code, page := get(t, link); code != 200 || !strings.Contains(page, "You said: what&#39;s due today?") {
		t.Errorf("the page at the printed link: HTTP %d\n%s", code, page)
	}
}

func TestRunsReadsTheDatabaseWithoutServe(t *testing.T) {
	e := newEnv(t)
	want := "no database at" // no bbolt file yet
	if e.onPostgres() {
		want = "run tidybot migrate" // runs reads, never migrates
	}
	m := &Main{Args: []string{"runs"}, Config: &e.cfg, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	if err := m.Run(t.Context()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("runs before any run: %v, want it to mention %q", err, want)
	}
	_ = m.Close()
	e.chat(t, "what's due today?\n", nil)
	list := runsCmd(t, e)
	mustContain(t, list, "console:", "done")
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	mustContain(t, runsCmd(t, e, "show", id), "Asked:  what's due today?", "Answer: You said: what's due today?", "Step 1 · model")
	var out bytes.Buffer
	m = &Main{Args: []string{"runs", "show", "nope"}, Config: &e.cfg, Stdout: &out, Stderr: &out}
	err := m.Run(t.Context())
	_ = m.Close()
	if err == nil || !strings.Contains(err.Error(), "no run with id nope") {
		t.Errorf("runs show nope: %v", err)
	}
	m = &Main{Args: []string{"runs", "link", id}, Config: &e.cfg, Stdout: &out, Stderr: &out}
	err = m.Run(t.Context())
	_ = m.Close()
	if err == nil || !strings.Contains(err.Error(), "start tidybot serve once") {
		t.Errorf("runs link before serve ever ran: %v", err)
	}
}

func TestSecretKeyAndPublicURLChecked(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"short key", func(c *Config) { c.SecretKey = "c2hvcnQ=" }, "TIDYBOT_SECRET_KEY must be 32 bytes"},
		{"not base64", func(c *Config) { c.SecretKey = "not base64 at all!" }, "TIDYBOT_SECRET_KEY is not base64"},
		{"public URL without scheme", func(c *Config) { c.PublicURL = "bot.example.com" }, "TIDYBOT_PUBLIC_URL"},
		{"negative TTL", func(c *Config) { c.RunLinkTTL = -time.Hour }, "TIDYBOT_RUN_LINK_TTL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := e.cfg
			tt.edit(&cfg)
			err := validate(cfg, true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
			if cfg.SecretKey != "" && strings.Contains(err.Error(), cfg.SecretKey) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestServeSlackDetailsLinkOnlyForTheAsker(t *testing.T) {
	e := newEnv(t)
	e.cfg.PublicURL = "https://bot.example.com"
	sl, base := serveSlack(t, e)
	// In a channel: the answer everyone sees has no link; the asker gets
	// it as an ephemeral message in the run's thread.
	for _, ev := range sl.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " what's due today?", TS: "1.1"}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	var eph slacktest.Posted
	waitFor(t, "the ephemeral link", func() bool {
		for _, p := range sl.Posts("C1") {
			if p.Ephemeral {
				eph = p
				return true
			}
		}
		return false
	})
	if eph.User != "U1" || eph.ThreadTS != "1.1" || len(eph.URLs) != 1 || !strings.HasPrefix(eph.URLs[0], "https://bot.example.com/runs/") {
		t.Errorf("ephemeral link %+v", eph)
	}
	for _, p := range sl.Posts("C1") {
		if !p.Ephemeral && len(p.URLs) > 0 && p.URLs[0] != "" {
			t.Errorf("a post everyone sees carries a link: %+v", p)
		}
	}
	u, _ := url.Parse(eph.URLs[0])
	if code, page := get(t, base+u.Path+"?"+u.RawQuery); code != 200 || !strings.Contains(page, "You said: what&#39;s due today?") {
		t.Errorf("the linked page: HTTP %d\n%s", code, page)
	}
	// In a DM: the button is on the answer.
	for _, ev := range sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "and tomorrow?", TS: "2.2"}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the DM answer", func() bool { return lastPost(sl, "D1").Shown() == "You said: and tomorrow?" })
	if p := lastPost(sl, "D1"); len(p.URLs) != 1 || !strings.HasPrefix(p.URLs[0], "https://bot.example.com/runs/") || p.Ephemeral {
		t.Errorf("DM answer %+v", p)
	}
}
