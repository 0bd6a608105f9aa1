package telegram_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
)

func newAdapter(t testing.TB, secret string) (*telegram.Adapter, *telegramtest.Server) {
	t.Helper()
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, WebhookSecret: secret, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a, srv
}

func TestSendSplitsAndPutsButtonsLast(t *testing.T) {
	a, srv := newAdapter(t, "")
	long := strings.Repeat("Moved “Buy cake” to Birthday 🎂\n", 200) // > 4096 UTF-16 units
	id, err := a.Send(t.Context(), bot.Outgoing{ChatID: "42", Text: long, Buttons: []bot.Button{{Label: "Delete 1 task", Data: "w:abcd1234:y"}, {Label: "Cancel", Data: "w:abcd1234:n"}}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(42)
	if len(msgs) != 2 {
		t.Fatalf("sent %d messages, want 2", len(msgs))
	}
	if len(msgs[0].Buttons) != 0 || strings.Join(msgs[1].Labels, ",") != "Delete 1 task,Cancel" {
		t.Errorf("buttons: %v / %v", msgs[0].Labels, msgs[1].Labels)
	}
	if id == "" || msgs[1].ParseMode != "" {
		t.Errorf("id %q, parse mode %q (want plain text)", id, msgs[1].ParseMode)
	}
}

func TestEditInPlace(t *testing.T) {
	a, srv := newAdapter(t, "")
	id, _ := a.Send(t.Context(), bot.Outgoing{ChatID: "42", Text: "🤔 Working on it…"})
	if err := a.Edit(t.Context(), id, bot.Outgoing{ChatID: "42", Text: "🔎 Read the inbox: 9 tasks"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(t.Context(), id, bot.Outgoing{ChatID: "42", Text: "🔎 Read the inbox: 9 tasks"}); err != nil {
		t.Errorf("an unchanged edit is an error: %v", err)
	}
	if m := srv.Messages(42); len(m) != 1 || m[0].Text != "🔎 Read the inbox: 9 tasks" || m[0].Edits != 1 {
		t.Errorf("messages: %+v", m)
	}
}

// A 429 on a call the bot's send queue makes is not waited out here: the
// error carries retry_after (bot.RateLimited) so the queue pauses.
func TestRateLimitGoesToTheQueue(t *testing.T) {
	a, srv := newAdapter(t, "")
	srv.RateLimit("sendMessage", 1)
	_, err := a.Send(t.Context(), bot.Outgoing{ChatID: "42", Text: "hi"})
	var rl bot.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter() != time.Second {
		t.Fatalf("err = %v, want a bot.RateLimited with retry after 1s", err)
	}
	if srv.Calls("sendMessage") != 1 || len(srv.Messages(42)) != 0 {
		t.Errorf("calls %d, messages %d: the adapter retried by itself", srv.Calls("sendMessage"), len(srv.Messages(42)))
	}
	srv.RateLimit("editMessageText", 1)
	if err := a.Edit(t.Context(), "1", bot.Outgoing{ChatID: "42", Text: "x"}); !errors.As(err, &rl) {
		t.Errorf("edit: err = %v, want a bot.RateLimited", err)
	}
	// Setup is not queued: it waits the 429 out itself.
	srv.RateLimit("setMyCommands", 1)
	if err := a.Setup(t.Context()); err != nil {
		t.Errorf("setup: %v", err)
	}
}

func TestTokenNeverInErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens: a transport error with the URL in it
	_, err := telegram.New(telegram.Config{Token: "123:SECRET-token", APIURL: srv.URL})
	if err == nil || strings.Contains(err.Error(), "SECRET-token") {
		t.Errorf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") {
		t.Errorf("err does not say what to check: %v", err)
	}
}

// recorder is a Handler that records events.
type recorder struct {
	mu  sync.Mutex
	ins []bot.Incoming
}

func (r *recorder) Handle(_ context.Context, in bot.Incoming) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ins = append(r.ins, in)
	return nil
}

func (r *recorder) got() []bot.Incoming {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bot.Incoming(nil), r.ins...)
}

func TestPollParsesAndConfirms(t *testing.T) {
	a, srv := newAdapter(t, "")
	srv.PushText(42, 7, "/tidy-inbox")
	srv.PushText(42, 7, "/tidy_inbox@tidybot")
	srv.PushText(-100, 7, "/help@someotherbot")
	srv.PushText(42, 7, "move everything about the birthday into one project")
	srv.PushCallback(42, 7, 555, "w:abcd1234:1")
	srv.PushRaw(map[string]any{"message": map[string]any{"message_id": 1, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}, "from": map[string]any{"id": 7}, "voice": map[string]any{"file_id": "x"}}})
	rec := &recorder{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Poll(ctx, rec) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.got()) < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for srv.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := rec.got()
	if len(got) != 5 {
		t.Fatalf("handled %d updates: %+v", len(got), got)
	}
	if a := got[4].Attachment; a == nil || a.Kind != bot.AttachVoice || a.Ref != "x" {
		t.Errorf("voice note: %+v", got[4])
	}
	if got[0].Command != "tidy-inbox" || got[1].Command != "tidy-inbox" || got[2].Text == "" || got[2].Command != "" {
		t.Errorf("commands: %+v", got[:3])
	}
	if got[3].Button != "w:abcd1234:1" || got[3].ButtonRef == "" || got[3].UserID != "7" || got[3].ChatID != "42" {
		t.Errorf("button press: %+v", got[3])
	}
	if got[0].EventID == got[1].EventID || !got[0].DM {
		t.Errorf("event ids %q %q, DM %v", got[0].EventID, got[1].EventID, got[0].DM)
	}
	if srv.Pending() != 0 {
		t.Errorf("%d updates not confirmed", srv.Pending())
	}
}

func TestWebhookChecksTheSecret(t *testing.T) {
	a, _ := newAdapter(t, "s3cret_token")
	rec := &recorder{}
	h := a.WebhookHandler(rec)
	for _, tt := range []struct {
		name   string
		secret string
		body   string
		want   int
	}{
		{"no secret", "", string(telegramtest.Update(1, 42, 7, "hi")), 401},
		{"wrong secret", "guess", string(telegramtest.Update(2, 42, 7, "hi")), 401},
		{"malformed", "s3cret_token", `{"update_id":`, 400},
		{"good", "s3cret_token", string(telegramtest.Update(3, 42, 7, "hi")), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/telegram/webhook", strings.NewReader(tt.body))
			if tt.secret != "" {
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tt.secret)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d", w.Code, tt.want)
			}
		})
	}
	if got := rec.got(); len(got) != 1 || got[0].EventID != "u3" {
		t.Errorf("handled %+v, want only the good update", got)
	}
}

func TestSetupRegistersCommandsAndWebhook(t *testing.T) {
	srv := telegramtest.New()
	defer srv.Close()
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, WebhookURL: "https://bot.example.com/telegram/webhook", WebhookSecret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(srv.Commands(), `"tidy_inbox"`) || strings.Contains(srv.Commands(), "tidy-inbox") {
		t.Errorf("commands: %s", srv.Commands())
	}
	if wh := srv.Webhook(); wh["secret_token"] != "s3cret" || wh["url"] != "https://bot.example.com/telegram/webhook" {
		t.Errorf("webhook: %v", wh)
	}
	if strings.Contains(srv.Commands(), `"connect"`) {
		t.Errorf("personal mode registers /connect: %s", srv.Commands())
	}
}

func TestSetupRegistersTeamCommandsInTeamMode(t *testing.T) {
	srv := telegramtest.New()
	defer srv.Close()
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, Team: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{`"tidy_inbox"`, `"connect"`, `"disconnect"`} {
		if !strings.Contains(srv.Commands(), c) {
			t.Errorf("team mode commands lack %s: %s", c, srv.Commands())
		}
	}
}

// flaky fails its first call, as a store that is briefly unavailable.
type flaky struct {
	recorder
	failed bool
}

func (f *flaky) Handle(ctx context.Context, in bot.Incoming) error {
	f.mu.Lock()
	if !f.failed {
		f.failed = true
		f.mu.Unlock()
		return errors.New("disk full")
	}
	f.mu.Unlock()
	return f.recorder.Handle(ctx, in)
}

func TestPollRetriesAnUpdateItCouldNotStore(t *testing.T) {
	a, srv := newAdapter(t, "")
	srv.PushText(42, 7, "first")
	srv.PushText(42, 7, "second")
	h := &flaky{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Poll(ctx, h) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.got()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	got := h.got()
	if len(got) != 2 || got[0].Text != "first" || got[1].Text != "second" {
		t.Errorf("handled %+v: want first then second, nothing lost", got)
	}
}

func TestGroupsOnlyWhatIsAddressedToTheBot(t *testing.T) {
	a, srv := newAdapter(t, "")
	srv.PrivacyOff() // every group message reaches the bot: it picks
	const group = -100
	botMsg, err := a.Send(t.Context(), bot.Outgoing{ChatID: "-100", Text: "Tidied your inbox."})
	if err != nil {
		t.Fatal(err)
	}
	botID, _ := strconv.Atoi(botMsg)
	want := map[int]string{} // update id → the text or command the bot should get
	srv.PushText(group, 7, "lunch anyone?")
	srv.PushText(group, 7, "/help@someotherbot")
	srv.PushText(group, 7, "/weather")                   // an unknown command, not addressed to us
	srv.PushText(group, 7, "ask @someone_else about it") // a mention of someone else
	want[srv.PushText(group, 7, "@tidybot what's due today?")] = "what's due today?"
	want[srv.PushText(group, 7, "hey @TidyBot, what's due?")] = "hey, what's due?"
	want[srv.PushReply(group, 7, botID, "and the dentist?")] = "and the dentist?"
	human := srv.PushText(group, 8, "I'll be late")
	srv.PushReply(group, 7, srv.MessageID(human), "me too") // a reply to a person
	want[srv.PushText(group, 7, "/undo@tidybot")] = "/undo"
	want[srv.PushText(group, 7, "/usage")] = "/usage"
	want[srv.PushText(group, 7, "/tidy-inbox@tidybot")] = "/tidy-inbox"
	want[srv.PushText(group, 7, "/frobnicate@tidybot")] = "/frobnicate" // addressed to us: the bot says it does not know it
	want[srv.PushText(42, 7, "lunch anyone?")] = "lunch anyone?"        // a DM: everything
	want[srv.PushCallbackWithoutMessage(7, "w:abcd1234:y")] = "button w:abcd1234:y"
	rec := &recorder{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Poll(ctx, rec) }()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, in := range rec.got() {
		id, _ := strconv.Atoi(strings.TrimPrefix(in.EventID, "u"))
		switch {
		case in.Button != "":
			got[id] = "button " + in.Button
			if in.ButtonRef == "" {
				t.Errorf("a press without a message cannot be answered: %+v", in)
			}
		case in.Command != "":
			got[id] = "/" + in.Command
		default:
			got[id] = in.Text
		}
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("update %d: got %q, want %q", id, got[id], w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("update %d (%q) is not addressed to the bot but was handled", id, g)
		}
	}
}

func TestAnswerButtonWithoutMessage(t *testing.T) {
	a, srv := newAdapter(t, "")
	id := srv.PushCallbackWithoutMessage(7, "w:abcd1234:y")
	if err := a.AnswerButton(t.Context(), "cb"+strconv.Itoa(id), "This question is no longer open."); err != nil {
		t.Fatal(err)
	}
	if got := srv.Answers(); len(got) != 1 {
		t.Errorf("answers %q", got)
	}
}

func TestNoTokenInLogsOrErrorsWhenTelegramEchoesIt(t *testing.T) {
	srv := telegramtest.New()
	t.Cleanup(srv.Close)
	srv.EchoToken()
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []string
	if _, err := telegram.New(telegram.Config{Token: "123:WRONG-secret", APIURL: srv.URL, Logger: log}); err != nil {
		errs = append(errs, err.Error())
	}
	a, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, Logger: log, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(t.Context(), "12345", bot.Outgoing{ChatID: "42", Text: "gone"}); err != nil {
		errs = append(errs, err.Error())
	}
	if err := a.AnswerButton(t.Context(), "no-such-query", ""); err != nil {
		errs = append(errs, err.Error())
	}
	mu.Lock()
	all := strings.Join(errs, "\n") + "\n" + logs.String()
	mu.Unlock()
	if len(errs) != 3 || !strings.Contains(all, "(token <TELEGRAM_BOT_TOKEN>)") {
		t.Fatalf("want three errors that still say what went wrong:\n%s", all)
	}
	for _, tok := range []string{"WRONG-secret", srv.Token} {
		if strings.Contains(all, tok) {
			t.Errorf("%s in an error or a log line:\n%s", tok, all)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// FuzzGroupMessage feeds the group filter messages with arbitrary
// entities (offsets and lengths come from the client's side of the wire).
func FuzzGroupMessage(f *testing.F) {
	a, _ := newAdapter(f, "")
	f.Add("@tidybot what's due?", 0, 8, "mention")
	f.Add("hey @TidyBot, hi", 4, 8, "mention")
	f.Add("🎂 @tidybot", 3, 8, "mention")
	f.Add("hello world", 5, -2, "mention")
	f.Add("/undo@tidybot now", 0, 13, "bot_command")
	f.Fuzz(func(t *testing.T, text string, off, n int, kind string) {
		u := tgbotapi.Update{UpdateID: 1, Message: &tgbotapi.Message{MessageID: 1, Text: text,
			From: &tgbotapi.User{ID: 7}, Chat: &tgbotapi.Chat{ID: -100, Type: "group"},
			Entities: []tgbotapi.MessageEntity{{Type: kind, Offset: off, Length: n}}}}
		in, ok := a.Incoming(u)
		if ok && in.Command == "" && strings.TrimSpace(in.Text) == "" {
			t.Errorf("an empty message was handled: %+v", in)
		}
	})
}

// TestCommandNamesRoundTrip: each of the bot's commands (bot.Commands,
// team mode's included) as the help spells it is read back as that
// command, in a direct chat and unaddressed in a group, and is one
// Telegram has registered.
func TestCommandNamesRoundTrip(t *testing.T) {
	a, _ := newAdapter(t, "")
	registered := map[string]bool{}
	for _, c := range telegram.Commands(true) {
		registered["/"+c.Command] = true
	}
	for _, c := range bot.Commands(true) {
		typed := a.CommandName(c.Name)
		if !registered[typed] {
			t.Errorf("%s is spelled %q, which is not registered", c.Name, typed)
		}
		for _, chat := range []tgbotapi.Chat{{ID: 42, Type: "private"}, {ID: -100, Type: "supergroup"}} {
			u := tgbotapi.Update{UpdateID: 1, Message: &tgbotapi.Message{MessageID: 1, Text: typed,
				From: &tgbotapi.User{ID: 42}, Chat: &chat,
				Entities: []tgbotapi.MessageEntity{{Type: "bot_command", Offset: 0, Length: len(typed)}}}}
			if in, ok := a.Incoming(u); !ok || in.Command != c.Name {
				t.Errorf("%q in a %s chat is read as %+v (ok %v), want command %s", typed, chat.Type, in, ok, c.Name)
			}
		}
	}
}

// TestFakeRefusesBadCommands: the fake refuses a command list Telegram
// would (a hyphen, an empty description), so TestSetup… prove the
// registered list is one Telegram takes.
func TestFakeRefusesBadCommands(t *testing.T) {
	srv := telegramtest.New()
	defer srv.Close()
	for _, list := range []string{`[{"command":"tidy-inbox","description":"Sort"}]`, `[{"command":"Undo","description":"Undo"}]`, `[{"command":"undo","description":""}]`} {
		resp, err := http.PostForm(srv.URL+"/bot"+srv.Token+"/setMyCommands", map[string][]string{"commands": {list}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("setMyCommands %s: status %d, want 400", list, resp.StatusCode)
		}
	}
}

// TestGroupLimitGoesToTheQueue: Telegram's limit of 20 messages a minute
// to one group, as the fake enforces it, reaches the bot's send queue as
// a bot.RateLimited with the wait Telegram gave (up to the minute), not
// waited out here; a private chat and another group are not held back.
func TestGroupLimitGoesToTheQueue(t *testing.T) {
	a, srv := newAdapter(t, "")
	for i := range 20 {
		if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "-1001", Text: "hi"}); err != nil {
			t.Fatalf("message %d to the group: %v", i+1, err)
		}
	}
	_, err := a.Send(t.Context(), bot.Outgoing{ChatID: "-1001", Text: "one too many"})
	var rl bot.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter() < 50*time.Second || rl.RetryAfter() > time.Minute || srv.Throttled() != 1 {
		t.Fatalf("the 21st message of the minute to a group: %v (throttled %d), want a bot.RateLimited of about a minute", err, srv.Throttled())
	}
	if n := len(srv.Messages(-1001)); n != 20 {
		t.Errorf("%d messages in the group, want 20", n)
	}
	for _, chat := range []string{"42", "-1002"} {
		if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: chat, Text: "hi"}); err != nil {
			t.Errorf("a message to %s while the group is over its limit: %v", chat, err)
		}
	}
}
