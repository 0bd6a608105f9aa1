package discordtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
)

// rest is a discordgo session for REST calls only (no gateway).
func rest(t *testing.T, srv *discordtest.Server) *discordgo.Session {
	t.Helper()
	return newSession(t, srv, "Bot "+discordtest.Token).Session
}

// raw makes a call to the fake as the bot would, without discordgo (nor
// its rate limiter); the caller closes the response's body.
func raw(t *testing.T, srv *discordtest.Server, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bot "+discordtest.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: srv.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// wantRestErr checks that err, what a call returned, is Discord's
// error with that status and code.
func wantRestErr(t *testing.T, err error, what string, status, code int) {
	t.Helper()
	if gotStatus, gotCode, _ := restErr(t, err); gotStatus != status || gotCode != code {
		t.Errorf("%s: %d %d, want %d %d", what, gotStatus, gotCode, status, code)
	}
}

// restErr unwraps discordgo's REST error: the HTTP status and Discord's
// JSON error code.
func restErr(t *testing.T, err error) (status, code int, body map[string]any) {
	t.Helper()
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *discordgo.RESTError", err)
	}
	_ = json.Unmarshal(re.ResponseBody, &body)
	if re.Message != nil {
		code = re.Message.Code
	}
	return re.Response.StatusCode, code, body
}

func TestTokenIsChecked(t *testing.T) {
	srv := discordtest.New(t)
	dg := newSession(t, srv, "Bot wrong").Session
	_, err := dg.User("@me")
	status, code, body := restErr(t, err)
	if status != 401 || code != 0 || body["message"] != "401: Unauthorized" {
		t.Errorf("got %d %d %v, want 401 {message: 401: Unauthorized, code: 0}", status, code, body)
	}
	me, err := rest(t, srv).User("@me")
	if err != nil || me.ID != srv.BotID() || !me.Bot {
		t.Errorf("User(@me) = %+v, %v", me, err)
	}
}

func buttons(n int, prefix string) discordgo.ActionsRow {
	var row discordgo.ActionsRow
	for i := range n {
		row.Components = append(row.Components, discordgo.Button{Label: "b", CustomID: prefix + string(rune('a'+i))})
	}
	return row
}

func TestMessageLimits(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch := srv.DMChannel("42")
	// Code points are counted: 2,000 emoji (4,000 UTF-16 units) fit.
	if _, err := dg.ChannelMessageSend(ch, strings.Repeat("😀", 2000)); err != nil {
		t.Fatalf("2,000 characters: %v", err)
	}
	rows := func(n int) []discordgo.MessageComponent {
		var out []discordgo.MessageComponent
		for i := range n {
			out = append(out, buttons(5, string(rune('a'+i))))
		}
		return out
	}
	cases := []struct {
		name  string
		send  *discordgo.MessageSend
		code  int
		field string
	}{
		{"2001 characters", &discordgo.MessageSend{Content: strings.Repeat("x", 2001)}, 50035, "content"},
		{"empty", &discordgo.MessageSend{}, 50006, ""},
		{"six rows", &discordgo.MessageSend{Content: "x", Components: rows(6)}, 50035, "components"},
		{"six buttons", &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{buttons(6, "x")}}, 50035, "components"},
		{"long custom_id", &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "b", CustomID: strings.Repeat("c", 101)}}}}}, 50035, "components"},
		{"same custom_id twice", &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "b", CustomID: "c"}, discordgo.Button{Label: "b", CustomID: "c"}}}}}, 50035, "components"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dg.ChannelMessageSendComplex(ch, tc.send)
			status, code, body := restErr(t, err)
			if status != 400 || code != tc.code {
				t.Fatalf("got %d code %d (%v), want 400 code %d", status, code, body, tc.code)
			}
			if tc.field != "" {
				errs, _ := body["errors"].(map[string]any)
				if _, ok := errs[tc.field]; !ok {
					t.Errorf("errors = %v, want the field %s", body["errors"], tc.field)
				}
			}
		})
	}
	if got := srv.Messages(ch); len(got) != 1 {
		t.Errorf("%d messages kept, want only the valid one", len(got))
	}
	ok, err := dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "pick", Components: rows(5)})
	if err != nil {
		t.Fatalf("5 rows of 5: %v", err)
	}
	got := srv.Messages(ch)
	if last := got[len(got)-1]; last.ID != ok.ID || len(last.Rows) != 5 || len(last.Rows[4]) != 5 || last.Rows[0][0].CustomID != "aa" {
		t.Errorf("kept %+v", last)
	}
}

func TestUnknownChannel(t *testing.T) {
	srv := discordtest.New(t)
	_, err := rest(t, srv).ChannelMessageSend("123", "x")
	wantRestErr(t, err, "a message to an unknown channel", 404, 10003)
}

func TestDMChannelIsStable(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	a, err := dg.UserChannelCreate("42")
	if err != nil {
		t.Fatal(err)
	}
	b, err := dg.UserChannelCreate("42")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := dg.UserChannelCreate("43")
	if a.ID != b.ID || a.Type != discordgo.ChannelTypeDM || a.ID != srv.DMChannel("42") || c.ID == a.ID {
		t.Errorf("DM channels %+v %+v %+v", a, b, c)
	}
	if len(a.Recipients) != 1 || a.Recipients[0].ID != "42" {
		t.Errorf("recipients = %+v", a.Recipients)
	}
}

func TestTypingIsCounted(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch := srv.DMChannel("42")
	for range 2 {
		if err := dg.ChannelTyping(ch); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Typing(ch); got != 2 {
		t.Errorf("Typing = %d, want 2", got)
	}
}

func TestEditKeepsHistoryAndHistoryReadsAfter(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch, first := srv.DM("42", "hi")
	m, err := dg.ChannelMessageSend(ch, "working…")
	if err != nil {
		t.Fatal(err)
	}
	edited, err := dg.ChannelMessageEdit(ch, m.ID, "done")
	if err != nil {
		t.Fatal(err)
	}
	if edited.Content != "done" || edited.EditedTimestamp == nil {
		t.Errorf("edit answered %+v", edited)
	}
	got := srv.Messages(ch)
	if len(got) != 1 || got[0].Content != "done" || len(got[0].Edits) != 1 || got[0].Edits[0] != "working…" {
		t.Errorf("Messages = %+v", got)
	}
	// Another's message is not the bot's to edit.
	_, err = dg.ChannelMessageEdit(ch, first, "x")
	wantRestErr(t, err, "edit of a person's message", 403, 50005)
	second, _ := dg.ChannelMessageSend(ch, "two")
	hist, err := dg.ChannelMessages(ch, 10, "", first, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].ID != second.ID || hist[1].ID != m.ID {
		t.Errorf("history after the person's message = %v, want [two, done] newest first", ids(hist))
	}
	if _, err := dg.ChannelMessages(ch, 101, "", "", ""); err == nil {
		t.Error("limit 101 accepted")
	}
}

func ids(ms []*discordgo.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID+":"+m.Content)
	}
	return out
}

func TestEnforceNonceDedupes(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch := srv.DMChannel("42")
	post := func(nonce string) *discordgo.Message {
		t.Helper()
		body := map[string]any{"content": "answer", "nonce": nonce, "enforce_nonce": true}
		raw, err := dg.RequestWithBucketID("POST", discordgo.EndpointChannelMessages(ch), body, discordgo.EndpointChannelMessages(ch))
		if err != nil {
			t.Fatal(err)
		}
		var m discordgo.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	a, b, c := post("outbox-1"), post("outbox-1"), post("outbox-2")
	if a.ID != b.ID || a.ID == c.ID {
		t.Errorf("ids %s %s %s: the same nonce must return the same message", a.ID, b.ID, c.ID)
	}
	if got := srv.Messages(ch); len(got) != 2 || got[0].Nonce != `"outbox-1"` {
		t.Errorf("Messages = %+v", got)
	}
	_, err := dg.RequestWithBucketID("POST", discordgo.EndpointChannelMessages(ch),
		map[string]any{"content": "x", "nonce": strings.Repeat("n", 26)}, "")
	wantRestErr(t, err, "26-character nonce", 400, 50035)
}

func TestThreadFromAMessage(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	mid := srv.Say("G1", "C1", "7", "<@"+srv.BotID()+"> tidy")
	th, err := dg.MessageThreadStartComplex("C1", mid, &discordgo.ThreadStart{Name: "tidy", AutoArchiveDuration: 60})
	if err != nil {
		t.Fatal(err)
	}
	if th.ID != mid || th.Type != discordgo.ChannelTypeGuildPublicThread || th.ParentID != "C1" || th.GuildID != "G1" {
		t.Errorf("thread = %+v", th)
	}
	if _, err := dg.ChannelMessageSend(th.ID, "on it"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(th.ID); len(got) != 1 || got[0].Content != "on it" {
		t.Errorf("thread messages = %+v", got)
	}
	if got := srv.Threads(); len(got) != 1 || got[0].ID != mid || got[0].Name != "tidy" {
		t.Errorf("Threads = %+v", got)
	}
	_, err = dg.MessageThreadStartComplex("C1", mid, &discordgo.ThreadStart{Name: "again"})
	wantRestErr(t, err, "second thread", 400, 160004)
	_, dm := srv.DM("7", "x")
	_, err = dg.MessageThreadStartComplex(srv.DMChannel("7"), dm, &discordgo.ThreadStart{Name: "dm"})
	wantRestErr(t, err, "thread in a DM", 400, 50024)
}

func TestRateLimitedRouteDoesNotStallAnother(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	dg.ShouldRetryOnRateLimit = false
	a, b := srv.DMChannel("1"), srv.DMChannel("2")
	srv.SetRetryAfter(1500 * time.Millisecond)
	srv.RateLimit("POST /channels/"+a+"/messages", 1)
	_, err := dg.ChannelMessageSend(a, "x")
	var rl *discordgo.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("err = %v, want a RateLimitError of 1.5s", err)
	}
	// Another channel (its own bucket) and another route go on at once.
	if _, err := dg.ChannelMessageSend(b, "y"); err != nil {
		t.Errorf("other channel: %v", err)
	}
	if err := dg.ChannelTyping(a); err != nil {
		t.Errorf("other route: %v", err)
	}
	if got := srv.Limited(); got != 1 {
		t.Errorf("Limited = %d, want 1", got)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	srv := discordtest.New(t)
	ch := srv.DMChannel("1")
	srv.RateLimit("POST /channels/{channel.id}/messages", 1)
	do := func() *http.Response {
		return raw(t, srv, "POST", "https://discord.com/api/v10/channels/"+ch+"/messages", `{"content":"x"}`)
	}
	resp := do()
	var body struct {
		Message    string  `json:"message"`
		RetryAfter float64 `json:"retry_after"`
		Global     *bool   `json:"global"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Bucket") == "" ||
		resp.Header.Get("X-RateLimit-Remaining") != "0" || body.RetryAfter <= 0 || body.Global == nil || *body.Global || body.Message == "" {
		t.Errorf("429: %d %v %+v", resp.StatusCode, resp.Header, body)
	}
	resp = do()
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") == "" || resp.Header.Get("X-RateLimit-Reset-After") == "" {
		t.Errorf("after the limit: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestBucketOverflowIs429(t *testing.T) {
	srv := discordtest.New(t)
	srv.SetBucketLimit(2, time.Minute)
	dg := rest(t, srv)
	dg.ShouldRetryOnRateLimit = false
	ch := srv.DMChannel("1")
	for range 2 {
		if _, err := dg.ChannelMessageSend(ch, "x"); err != nil {
			t.Fatal(err)
		}
	}
	// discordgo's own bucket now waits for the reset; a raw call shows
	// the fake's answer.
	resp := raw(t, srv, "POST", "https://discord.com/api/v9/channels/"+ch+"/messages", `{"content":"x"}`)
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Errorf("third call in the window: %d, want 429", resp.StatusCode)
	}
}

func TestGlobalRateLimit(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	dg.ShouldRetryOnRateLimit = false
	srv.GlobalRateLimit(1)
	_, err := dg.User("@me")
	var rl *discordgo.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("err = %v, want a RateLimitError", err)
	}
	if _, err := dg.User("@me"); err != nil {
		t.Errorf("after the global limit: %v", err)
	}
}

func TestAttachmentsBothWays(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	ch, _ := srv.DMFiles("7", "", discordtest.File{Name: "voice.ogg", ContentType: "audio/ogg", Data: []byte("OggS...")})
	m := b.waitMessages(t, 1)[0]
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "voice.ogg" || m.Attachments[0].Size != 7 ||
		!strings.HasPrefix(m.Attachments[0].URL, "https://cdn.discordapp.com/attachments/"+ch+"/") {
		t.Fatalf("attachments = %+v", m.Attachments)
	}
	resp, err := b.Client.Get(m.Attachments[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(data) != "OggS..." || resp.Header.Get("Content-Type") != "audio/ogg" {
		t.Errorf("download: %d %q %q", resp.StatusCode, data, resp.Header.Get("Content-Type"))
	}
	sent, err := b.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Files: []*discordgo.File{{Name: "plan.txt", ContentType: "text/plain", Reader: strings.NewReader("plan")}}})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Messages(ch)
	if len(sent.Attachments) != 1 || len(got) != 1 || len(got[0].Files) != 1 || string(got[0].Files[0].Data) != "plan" {
		t.Errorf("upload: %+v / %+v", sent.Attachments, got)
	}
}

func TestDeleteOnlyTheBotsOwn(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch, theirs := srv.DM("7", "hi")
	m, _ := dg.ChannelMessageSend(ch, "preview")
	if err := dg.ChannelMessageDelete(ch, m.ID); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(ch); len(got) != 1 || !got[0].Deleted {
		t.Errorf("after delete: %+v", got)
	}
	if _, err := dg.ChannelMessage(ch, m.ID); err == nil {
		t.Error("a deleted message is still there")
	}
	err := dg.ChannelMessageDelete(ch, theirs)
	wantRestErr(t, err, "deleting a person's DM", 403, 50003)
	// EPHEMERAL is not a flag a channel message may carry.
	e, err := dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "x", Flags: discordgo.MessageFlagsEphemeral})
	if err != nil || e.Flags != 0 {
		t.Errorf("flags 64 on a channel message: %v, %v", e, err)
	}
}

func TestMalformedRequests(t *testing.T) {
	srv := discordtest.New(t)
	ch := srv.DMChannel("1")
	cases := []struct {
		name, method, path, body string
		status, code             int
	}{
		{"invalid JSON", "POST", "/api/v9/channels/" + ch + "/messages", `{"content":`, 400, 50109},
		{"unknown route", "GET", "/api/v9/nothing/here", "", 404, 0},
		{"wrong method", "PUT", "/api/v9/channels/" + ch + "/typing", "", 405, 0},
		{"unknown version", "GET", "/api/v5/users/@me", "", 404, 0},
		{"content not a string", "POST", "/api/v10/channels/" + ch + "/messages", `{"content":5}`, 400, 50035},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := raw(t, srv, tc.method, "https://discord.com"+tc.path, tc.body)
			defer resp.Body.Close()
			var body struct {
				Code    *int   `json:"code"`
				Message string `json:"message"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body: %v", err)
			}
			if resp.StatusCode != tc.status || body.Code == nil || *body.Code != tc.code || body.Message == "" {
				t.Errorf("got %d %+v, want %d code %d", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
	if got := srv.Messages(ch); len(got) != 0 {
		t.Errorf("a malformed post was kept: %+v", got)
	}
}

func TestServerErrors(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch := srv.DMChannel("1")
	srv.Fail("POST /channels/{id}/messages", 500, 1)
	_, err := dg.ChannelMessageSend(ch, "x")
	if status, _, body := restErr(t, err); status != 500 || body["message"] != "500: Internal Server Error" {
		t.Errorf("got %d %v, want 500", status, body)
	}
	// discordgo tries a 502 again by itself.
	srv.Fail("POST /channels/{id}/messages", 502, 1)
	if _, err := dg.ChannelMessageSend(ch, "y"); err != nil {
		t.Errorf("after one 502: %v", err)
	}
	if got := srv.Messages(ch); len(got) != 1 || got[0].Content != "y" {
		t.Errorf("Messages = %+v", got)
	}
}

func TestAttachmentsOnFake(t *testing.T) {
	srv := discordtest.New(t)
	srv.AttachmentsOnFake()
	b := open(t, srv, allIntents)
	srv.DMFiles("7", "see", discordtest.File{Name: "a b.png", ContentType: "image/png", Data: []byte("PNG")})
	m := b.waitMessages(t, 1)[0]
	if !strings.HasPrefix(m.Attachments[0].URL, srv.URL()+"/attachments/") {
		t.Fatalf("url = %s", m.Attachments[0].URL)
	}
	resp, err := http.Get(m.Attachments[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "PNG" {
		t.Errorf("download = %q", data)
	}
}

func TestReactions(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	ch, id := srv.DM("7", "hi")
	if err := dg.MessageReactionAdd(ch, id, "👀"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Reactions(ch, id); len(got) != 1 || got[0] != "👀" {
		t.Errorf("Reactions = %q", got)
	}
	if err := dg.MessageReactionRemove(ch, id, "👀", "@me"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Reactions(ch, id); len(got) != 0 {
		t.Errorf("after removal: %q", got)
	}
	if got := srv.Requests("PUT /channels/{c}/messages/{m}/reactions/{e}/@me"); got != 1 {
		t.Errorf("Requests = %d, want 1", got)
	}
	err := dg.MessageReactionAdd(ch, "1", "👀")
	wantRestErr(t, err, "reaction on an unknown message", 404, 10008)
}

// Hold keeps a route's calls waiting until released (other routes
// answer meanwhile); a client that gives up is let go. (discordgo
// itself makes a call wait while another of its bucket is on its way:
// two channels here.)
func TestHold(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	one, two := srv.DMChannel("1"), srv.DMChannel("2")
	release := srv.Hold("GET /channels/{channel.id}")
	done := make(chan error, 1)
	go func() {
		_, err := dg.Channel(one)
		done <- err
	}()
	waitFor(t, func() bool { return srv.Requests("GET /channels/{}") == 1 })
	if _, err := dg.User(srv.BotID()); err != nil {
		t.Fatalf("another route while one is held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a held call was answered (%v)", err)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := dg.Channel(two, discordgo.WithContext(ctx)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a client that gave up: %v, want its deadline", err)
	}
	release()
	if err := <-done; err != nil {
		t.Errorf("once released: %v", err)
	}
	if _, err := dg.Channel(two); err != nil {
		t.Errorf("after the hold: %v", err)
	}
}
