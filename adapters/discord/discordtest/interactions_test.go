package discordtest_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
)

func register(t *testing.T, srv *discordtest.Server, dg *discordgo.Session, guild string) {
	t.Helper()
	_, err := dg.ApplicationCommandBulkOverwrite(srv.AppID(), guild, []*discordgo.ApplicationCommand{
		{Name: "tidy_inbox", Description: "Tidy the inbox"},
		{Name: "undo", Description: "Undo the last tidy", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "what", Description: "what to undo"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCommandsAreRegisteredAndChecked(t *testing.T) {
	srv := discordtest.New(t)
	dg := rest(t, srv)
	register(t, srv, dg, "")
	first := srv.Commands()
	register(t, srv, dg, "")
	got := srv.Commands()
	if len(got) != 2 || got[0].Name != "tidy_inbox" || got[1].Options[0].Name != "what" || got[0].ID != first[0].ID {
		t.Errorf("Commands = %+v (ids kept across overwrites: %v)", got, first)
	}
	listed, err := dg.ApplicationCommands(srv.AppID(), "")
	if err != nil || len(listed) != 2 {
		t.Errorf("GET commands = %v, %v", listed, err)
	}
	for _, bad := range []*discordgo.ApplicationCommand{
		{Name: "tidy-Inbox", Description: "upper case"},
		{Name: "tidy inbox", Description: "a space"},
		{Name: strings.Repeat("a", 33), Description: "too long"},
		{Name: "ok", Description: ""},
		{Name: "ok", Description: strings.Repeat("d", 101)},
	} {
		_, err := dg.ApplicationCommandBulkOverwrite(srv.AppID(), "G1", []*discordgo.ApplicationCommand{bad})
		wantRestErr(t, err, fmt.Sprintf("%q/%q", bad.Name, bad.Description), 400, 50035)
	}
	if _, err := dg.ApplicationCommandBulkOverwrite(srv.AppID(), "G1", []*discordgo.ApplicationCommand{{Name: "ping", Description: "p"}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Commands(); len(got) != 3 || got[2].GuildID != "G1" {
		t.Errorf("with a guild command: %+v", got)
	}
}

func TestSlashCommandDeferredThenFollowedUp(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	id, in := b.command(t, srv, "G1", "C1", "undo", map[string]string{"what": "last"})
	data := in.ApplicationCommandData()
	if in.Type != discordgo.InteractionApplicationCommand || data.Name != "undo" || data.Options[0].StringValue() != "last" ||
		in.Member == nil || in.Member.User.ID != "7" || in.GuildID != "G1" || in.ChannelID != "C1" || in.AppID != srv.AppID() {
		t.Fatalf("interaction = %+v", in)
	}
	if err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
	wantRestErr(t, err, "second answer", 400, 40060)
	if _, err := b.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: ptr("undone")}); err != nil {
		t.Fatal(err)
	}
	f, err := b.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "and one more"})
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Interaction(id)
	if st.Callback != 5 || st.Original == nil || st.Original.Content != "undone" || len(st.Followups) != 1 ||
		st.Followups[0].ID != f.ID || len(st.Refused) != 1 || st.Refused[0] != 40060 {
		t.Errorf("Interaction = %+v", st)
	}
	if got := srv.Messages("C1"); len(got) != 2 || got[0].Content != "undone" || got[0].Interaction != id {
		t.Errorf("channel messages = %+v", got)
	}
}

// sendButtons posts the bot's message with a row of buttons in ch.
func sendButtons(t *testing.T, b *bot, ch, content string, buttons ...discordgo.Button) *discordgo.Message {
	t.Helper()
	row := discordgo.ActionsRow{}
	for _, btn := range buttons {
		row.Components = append(row.Components, btn)
	}
	m, err := b.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: content, Components: []discordgo.MessageComponent{row}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openRegistered opens a session on srv with the commands of register
// registered globally.
func openRegistered(t *testing.T, srv *discordtest.Server) *bot {
	t.Helper()
	b := open(t, srv, allIntents)
	register(t, srv, b.Session, "")
	return b
}

// command has person 7 send a slash command and waits for the session
// to receive it.
func (b *bot) command(t *testing.T, srv *discordtest.Server, guildID, channelID, name string, opts map[string]string) (string, *discordgo.Interaction) {
	t.Helper()
	id := srv.Command("7", guildID, channelID, name, opts)
	return id, b.waitInteraction(t, id).Interaction
}

func ptr[T any](v T) *T { return &v }

func TestFirstFollowupReplacesTheThinkingMessage(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	id, in := b.command(t, srv, "", "", "tidy_inbox", nil)
	if in.User == nil || in.User.ID != "7" || in.ChannelID != srv.DMChannel("7") {
		t.Fatalf("DM interaction = %+v", in)
	}
	if err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "done"}); err != nil {
		t.Fatal(err)
	}
	st := srv.Interaction(id)
	if st.Original == nil || st.Original.Content != "done" || len(st.Followups) != 0 {
		t.Errorf("Interaction = %+v", st)
	}
}

func TestLateAnswerIsUnknownInteraction(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	srv.SetInteractionDeadline(50 * time.Millisecond)
	_, in := b.command(t, srv, "G1", "C1", "tidy_inbox", nil)
	time.Sleep(100 * time.Millisecond)
	err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
	wantRestErr(t, err, "late answer", 404, 10062)
	_, err = b.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "x"})
	wantRestErr(t, err, "follow-up after a missed deadline", 401, 50027)
}

func TestFollowupBeforeTheAnswerIsUnknownWebhook(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	_, in := b.command(t, srv, "G1", "C1", "tidy_inbox", nil)
	_, err := b.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "x"})
	wantRestErr(t, err, "follow-up first", 404, 10015)
}

func TestButtonPressAnsweredEphemeralAndUpdate(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	ch := srv.DMChannel("7")
	m := sendButtons(t, b, ch, "Delete 3 tasks?", discordgo.Button{Label: "Yes", CustomID: "yes"}, discordgo.Button{Label: "No", CustomID: "no", Style: discordgo.DangerButton})
	// Someone else pressing: an ephemeral answer, only they see it.
	other := b.waitInteraction(t, srv.Press("8", ch, m.ID, "yes")).Interaction
	if other.MessageComponentData().CustomID != "yes" || other.Message == nil || other.Message.ID != m.ID || other.User.ID != "8" {
		t.Fatalf("press = %+v", other)
	}
	if err := b.InteractionRespond(other, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: "Only the person who asked can answer.", Flags: discordgo.MessageFlagsEphemeral}}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Interaction(other.ID); !st.Ephemeral || st.Original.Content == "" {
		t.Errorf("ephemeral answer = %+v", st)
	}
	if got := srv.Messages(ch); len(got) != 1 {
		t.Errorf("the ephemeral answer is in the channel: %+v", got)
	}
	// The asker: the message is updated in place, buttons gone.
	own := b.waitInteraction(t, srv.Press("7", ch, m.ID, "no")).Interaction
	if err := b.InteractionRespond(own, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{Content: "Kept.", Components: []discordgo.MessageComponent{}}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(ch); len(got) != 1 || got[0].Content != "Kept." || len(got[0].Rows) != 0 {
		t.Errorf("after the update: %+v", got)
	}
	// Type 6 or 7 answers only components.
	register(t, srv, b.Session, "")
	cmd := b.waitInteraction(t, srv.Command("7", "", "", "undo", nil)).Interaction
	err := b.InteractionRespond(cmd, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
	wantRestErr(t, err, "type 6 for a command", 400, 50035)
}

// endpoint is an app's interactions endpoint: it checks the signature
// with the fake's public key and answers commands with a message.
func endpoint(t *testing.T, key ed25519.PublicKey) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig, err := hex.DecodeString(r.Header.Get("X-Signature-Ed25519"))
		msg := append([]byte(r.Header.Get("X-Signature-Timestamp")), body...)
		if err != nil || !ed25519.Verify(key, msg, sig) {
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		var in struct {
			Type int `json:"type"`
		}
		_ = json.Unmarshal(body, &in)
		w.Header().Set("Content-Type", "application/json")
		if in.Type == 1 {
			_, _ = w.Write([]byte(`{"type":1}`))
			return
		}
		_, _ = w.Write([]byte(`{"type":4,"data":{"content":"tidied","flags":64}}`))
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestSignedInteractionPosts(t *testing.T) {
	srv := discordtest.New(t)
	register(t, srv, rest(t, srv), "")
	hs := endpoint(t, srv.PublicKey())
	if ok, err := srv.Ping(hs.URL); err != nil || !ok {
		t.Fatalf("Ping = %v, %v", ok, err)
	}
	id, status, err := srv.PostCommand(hs.URL, "7", "", "", "tidy_inbox", nil)
	if err != nil || status != 200 {
		t.Fatalf("PostCommand = %d, %v", status, err)
	}
	if st := srv.Interaction(id); st.Callback != 4 || !st.Ephemeral || st.Original.Content != "tidied" {
		t.Errorf("Interaction = %+v", st)
	}
	if status, err := srv.PostForged(hs.URL, []byte(`{"type":1}`)); err != nil || status != 401 {
		t.Errorf("forged post: %d %v, want 401", status, err)
	}
	// The signature is over timestamp+body: another body fails.
	ts := "1700000000"
	req, _ := http.NewRequest("POST", hs.URL, bytes.NewReader([]byte(`{"type":2}`)))
	req.Header.Set("X-Signature-Ed25519", srv.Sign(ts, []byte(`{"type":1}`)))
	req.Header.Set("X-Signature-Timestamp", ts)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("signature of another body: %d", resp.StatusCode)
	}
}

func TestTokenLastsFifteenMinutes(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	id, in := b.command(t, srv, "G1", "C1", "tidy_inbox", nil)
	if err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	srv.AgeInteraction(id, 14*time.Minute)
	if _, err := b.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "at 14 minutes"}); err != nil {
		t.Errorf("follow-up at 14 minutes: %v", err)
	}
	srv.AgeInteraction(id, 2*time.Minute)
	_, err := b.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: ptr("at 16 minutes")})
	wantRestErr(t, err, "edit at 16 minutes", 401, 50027)
}

func TestDeferredUpdateThenEditOriginalEditsTheButtonsMessage(t *testing.T) {
	srv := discordtest.New(t)
	b := open(t, srv, allIntents)
	ch := srv.DMChannel("7")
	m := sendButtons(t, b, ch, "Delete?", discordgo.Button{Label: "Yes", CustomID: "yes"})
	in := b.waitInteraction(t, srv.Press("7", ch, m.ID, "yes")).Interaction
	if err := b.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: ptr("Deleted."), Components: &[]discordgo.MessageComponent{}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(ch); len(got) != 1 || got[0].Content != "Deleted." || len(got[0].Rows) != 0 {
		t.Errorf("Messages = %+v", got)
	}
	if st := srv.Interaction(in.ID); st.Callback != 6 || st.Original != nil {
		t.Errorf("Interaction = %+v", st)
	}
}

func TestInteractionsEndpointReplacesTheGateway(t *testing.T) {
	srv := discordtest.New(t)
	b := openRegistered(t, srv)
	srv.SetInteractionsEndpoint(endpoint(t, srv.PublicKey()).URL)
	id := srv.Command("7", "", "", "tidy_inbox", nil)
	if st := srv.Interaction(id); st.Callback != 4 || st.Original == nil || st.Original.Content != "tidied" {
		t.Errorf("Interaction = %+v", st)
	}
	b.mu.Lock()
	n := len(b.inters)
	b.mu.Unlock()
	if n != 0 {
		t.Errorf("%d INTERACTION_CREATE over the gateway with an endpoint set", n)
	}
}
