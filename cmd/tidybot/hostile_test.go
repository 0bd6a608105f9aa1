package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/accounts"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// teamEnv is `tidybot serve` in team mode with the fake Telegram and a
// fake Todoist with OAuth (issue 21's hostile inputs).
type teamEnv struct {
	*env
	svc  *todoisttest.Service
	tg   *telegramtest.Server
	base string
	logs *syncBuffer
}

// serveTeamTelegram serves team mode on the fake Telegram and Todoist
// (clock, if given, is the OAuth state's clock).
func serveTeamTelegram(t *testing.T, clock ...func() time.Time) *teamEnv {
	t.Helper()
	e := newEnv(t)
	svc, base := teamTodoist(t, e, 5)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	e.cfg.AllowedUsers = []string{"telegram:*"}
	logs := &syncBuffer{}
	serveTeam(t, e, logs, clock...)
	return &teamEnv{env: e, svc: svc, tg: tg, base: base, logs: logs}
}

// TestOAuthCallbackSaysOnlyOurWords: an error on the callback is
// described in our own fixed words per code; whatever text the query
// carries is not on the page (issue 21, item 11).
func TestOAuthCallbackSaysOnlyOurWords(t *testing.T) {
	te := serveTeamTelegram(t)
	evil := "Your account is suspended, call +1 555 0100 at once"
	tests := []struct {
		code, want string
	}{
		{"access_denied", "Access was not granted"},
		{"invalid_scope", "did not accept the permissions"},
		{evil, "Todoist did not connect your account."},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			q := url.Values{"error": {tt.code}, "error_description": {evil}, "state": {"x"}}
			code, body := get(t, te.base+accounts.CallbackPath+"?"+q.Encode())
			if code != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("HTTP %d %q, want 400 saying %q", code, body, tt.want)
			}
			if strings.Contains(body, "suspended") || strings.Contains(body, "555") {
				t.Errorf("the page repeats the query's words: %q", body)
			}
		})
	}
	if strings.Contains(te.logs.String(), "suspended") {
		t.Error("the log repeats the query's words")
	}
}

// TestChatGoesOnAfterAHugeLine: a line over 1 MB is cut like any long
// message, said so with its true length, and the lines after it are
// still read (issue 21, item 5).
func TestChatGoesOnAfterAHugeLine(t *testing.T) {
	e := newEnv(t)
	huge := strings.Repeat("é", 1_500_000) // 3 MB
	// The scenario model's reply to the huge line is cut off: that run
	// fails, so chat from a pipe ends with an error saying so.
	out, logs, err := e.runChat(t, "hello\n"+huge+"\nsecond\n", false)
	if err != nil && !strings.Contains(err.Error(), "a run failed") {
		t.Fatalf("chat: %v\n%s\n%s", err, out, logs)
	}
	mustContain(t, out, "You said: hello", "Your message is 1500000 characters long; I only read the first 8000.", "You said: second")
}

// pngBomb is a small PNG that declares w×h 8-bit grey pixels: a valid
// header and the first rows of zeros; a decoder allocates the whole
// image before it finds the data ends.
func pngBomb(t testing.TB, w, h int) []byte {
	t.Helper()
	chunk := func(out *bytes.Buffer, typ string, data []byte) {
		_ = binary.Write(out, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		out.WriteString(typ)
		out.Write(data)
		_ = binary.Write(out, binary.BigEndian, crc.Sum32())
	}
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 0, 0, 0, 0) // 8-bit greyscale, no interlace
	chunk(&b, "IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 64*(w+1))) // 64 rows, each a filter byte and w zeros
	_ = zw.Close()
	chunk(&b, "IDAT", z.Bytes())
	chunk(&b, "IEND", nil)
	return b.Bytes()
}

// TestImageBombIsRefusedFromItsHeader: a photo that declares 30000×30000
// pixels is refused with a plain message before anything is decoded: the
// process allocates next to nothing for it and the model never sees it
// (issue 21, item 1).
func TestImageBombIsRefusedFromItsHeader(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	bomb := pngBomb(t, 30000, 30000)
	if len(bomb) > 100<<10 {
		t.Fatalf("the fixture is %d bytes", len(bomb))
	}
	id := tg.AddFile("documents", ".png", bomb)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tg.PushPhoto(42, 42, "what is this?", telegramtest.PhotoSize{FileID: id, Width: 1280, Height: 1280})
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) != "" })
	runtime.ReadMemStats(&after)
	if got, want := lastText(tg, 42), "too large for me to look at: 30000×30000 pixels (900 megapixels); I take up to 40 megapixels"; !strings.Contains(got, want) {
		t.Errorf("answer %q, want %q", got, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
		t.Errorf("%d MB allocated while refusing it, want the header read only", alloc>>20)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model calls", n)
	}
	// The person can go on.
	tg.PushText(42, 42, "hello")
	waitFor(t, "the next answer", func() bool { return lastText(tg, 42) == "You said: hello" })
}

// TestTelegramPoisonUpdateIsSkipped: an update that does not decode (a
// text that is a number) is logged, counted in /metrics and confirmed;
// the updates after it are answered. By webhook it gets a 200, so
// Telegram does not send it again (issue 21, item 4).
func TestTelegramPoisonUpdateIsSkipped(t *testing.T) {
	metric := `tidybot_events_total{outcome="undecodable",platform="telegram"} 1`
	t.Run("long polling", func(t *testing.T) {
		e := newEnv(t)
		e.cfg.MetricsAddr = freeAddr(t)
		tg := serveTelegram(t, e)
		tg.PushUndecodable(42, 42)
		tg.PushText(42, 42, "hello")
		waitFor(t, "the answer after the poison update", func() bool { return lastText(tg, 42) == "You said: hello" })
		waitFor(t, "both confirmed", func() bool { return tg.Pending() == 0 })
		if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
			t.Errorf("/metrics lacks %s", metric)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		e := newEnv(t)
		e.cfg.MetricsAddr = freeAddr(t)
		tg := telegramtest.New()
		t.Cleanup(tg.Close)
		e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
		e.cfg.TelegramHook, e.cfg.TelegramWebhookSecret = "https://bot.example.com/telegram/webhook", "s3cret-hook"
		base := serve(t, e)
		post := func(body string) int {
			req, _ := http.NewRequest(http.MethodPost, base+"/telegram/webhook", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret-hook")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		poison := `{"update_id":7,"message":{"message_id":1,"date":1,"text":12345,"from":{"id":42,"is_bot":false,"first_name":"U"},"chat":{"id":42,"type":"private"}}}`
		if code := post(poison); code != http.StatusOK {
			t.Errorf("an undecodable update: HTTP %d, want 200 (Telegram retries anything else)", code)
		}
		if code := post(`{"message":"no update id"}`); code != http.StatusBadRequest {
			t.Errorf("a body that is no update: HTTP %d, want 400", code)
		}
		if code := post(string(telegramtest.Update(8, 42, 42, "hello"))); code != http.StatusOK {
			t.Errorf("a good update: HTTP %d", code)
		}
		waitFor(t, "the answer", func() bool { return lastText(tg, 42) == "You said: hello" })
		if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
			t.Errorf("/metrics lacks %s", metric)
		}
	})
}

// TestSlackSocketModePoisonEnvelopeIsAcknowledged: an envelope slack-go
// cannot decode is logged, counted and acknowledged, so Slack does not
// send it again; the next one is answered (issue 21, item 4).
func TestSlackSocketModePoisonEnvelopeIsAcknowledged(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = freeAddr(t)
	sl := serveSocketSlack(t, e)
	var poison map[string]any
	_ = json.Unmarshal(slacktest.MessageEvent("Ev1", "D1", "im", "U1", "x", "1.1", ""), &poison)
	poison["event"].(map[string]any)["text"] = 12345
	bad := sl.Push("events_api", poison)
	var ev map[string]any
	_ = json.Unmarshal(slacktest.MessageEvent("Ev2", "D1", "im", "U1", "hello", "1.2", ""), &ev)
	good := sl.Push("events_api", ev)
	waitFor(t, "the answer", func() bool { return lastPost(sl, "D1").Text == "You said: hello" })
	waitFor(t, "the poison envelope acknowledged", func() bool { return sl.Acked(bad) })
	if !sl.Acked(good) {
		t.Error("the good envelope was not acknowledged")
	}
	metric := `tidybot_events_total{outcome="undecodable",platform="slack"} 1`
	if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
		t.Errorf("/metrics lacks %s", metric)
	}
}

// TestStrangerFloodInAGroup: 300 people not on the allowlist mention the
// bot in one group: one notice is posted there, not 300; a stranger who
// does not address the bot gets nothing; an allowed person in the same
// group is answered (issue 21, item 7).
func TestStrangerFloodInAGroup(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	tg.PrivacyOff() // mentions, and the chatter that must get nothing, reach the bot
	const group = -100
	tg.PushText(group, 7, "just chatting, no bot here")
	for i := range 300 {
		tg.PushText(group, int64(1000+i), "@tidybot tidy my inbox")
	}
	waitFor(t, "every update taken", func() bool { return tg.Pending() == 0 })
	tg.PushText(group, 42, "@tidybot hello")
	waitFor(t, "the allowed person's answer", func() bool { return lastText(tg, group) == "You said: hello" })
	notices := 0
	var texts []string
	for _, m := range tg.Messages(group) {
		texts = append(texts, m.Text)
		if strings.Contains(m.Text, "only work for the people my owner allowed") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices in the group, want 1: %q", notices, texts)
	}
	// In a direct chat each stranger still learns their own id, once.
	tg.PushText(1000, 1000, "hi")
	tg.PushText(1000, 1000, "hi again")
	waitFor(t, "the refusal in the DM", func() bool { return strings.Contains(lastText(tg, 1000), "telegram:1000") })
	waitFor(t, "every update taken", func() bool { return tg.Pending() == 0 })
	if n := len(tg.Messages(1000)); n != 1 {
		t.Errorf("%d refusals in the stranger's DM, want 1", n)
	}
}

// TestConnectPromptOncePerHour: a person who has not connected their
// Todoist is prompted once, however many messages they send; /connect
// always answers with a link; what they asked last is kept (issue 21,
// item 7).
func TestConnectPromptOncePerHour(t *testing.T) {
	te := serveTeamTelegram(t)
	for i := range 5 {
		te.tg.PushText(43, 43, fmt.Sprintf("add task %d", i))
	}
	waitFor(t, "every update taken", func() bool { return te.tg.Pending() == 0 })
	waitFor(t, "the Connect prompt", func() bool { return connectLink(lastText(te.tg, 43)) != "" })
	te.tg.PushText(43, 43, "/help") // something answered, to know the queue has drained
	waitFor(t, "the help", func() bool { return strings.Contains(lastText(te.tg, 43), "/connect") })
	prompts := 0
	for _, m := range te.tg.Messages(43) {
		if connectLink(m.Text) != "" {
			prompts++
		}
	}
	if prompts != 1 {
		t.Errorf("%d Connect prompts for 5 messages, want 1", prompts)
	}
	te.tg.PushText(43, 43, "/connect")
	waitFor(t, "the link /connect asked for", func() bool { return connectLink(lastText(te.tg, 43)) != "" })
}

// pushFrom queues a private text message from a Telegram user with a
// username (PushText sends none).
func pushFrom(tg *telegramtest.Server, userID int64, username, text string) {
	msg := map[string]any{
		"message_id": 5000 + userID, "date": time.Now().Unix(), "text": text,
		"from": map[string]any{"id": userID, "is_bot": false, "first_name": username, "username": username},
		"chat": map[string]any{"id": userID, "type": "private"},
	}
	if strings.HasPrefix(text, "/") {
		msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(strings.Fields(text)[0])}}
	}
	tg.PushRaw(map[string]any{"message": msg})
}

// TestForwardedConnectLinkNamesWhoGetsAccess: Mallory (43) sends
// /connect and forwards the link to Vera, who is signed in to Todoist.
// Our page tells Vera whose chat account would get her Todoist before
// anything is sent to Todoist; Todoist's own authorize address, copied
// out of Mallory's browser and forwarded, connects nothing (the flow is
// bound to the browser that opened our page); and a person who connects
// sees in the chat which Todoist account it was (issue 21, item 2).
func TestForwardedConnectLinkNamesWhoGetsAccess(t *testing.T) {
	te := serveTeamTelegram(t)
	vera := te.svc.NewAccount(todoisttest.WithUser("Vera Victim", "vera@example.com"))
	pushFrom(te.tg, 43, "mallory", "/connect")
	waitFor(t, "Mallory's Connect link", func() bool { return connectLink(lastText(te.tg, 43)) != "" })
	link := connectLink(lastText(te.tg, 43))

	// Vera opens the forwarded link: our page, naming Mallory.
	code, body := visit(t, vera.Browser(), link)
	if code != http.StatusOK || !strings.Contains(body, "Telegram user @mallory (43)</strong> will be able to read and change your Todoist") {
		t.Fatalf("the Connect page: HTTP %d %q, want it to name Mallory", code, body)
	}
	if len(vera.Tokens()) != 0 {
		t.Fatal("opening the link connected Vera's Todoist before she chose to")
	}

	// Mallory copies Todoist's address out of her own browser and sends
	// that instead: the callback in Vera's browser is refused.
	jar, _ := cookiejar.New(nil)
	mallory := &http.Client{Jar: jar}
	_, page := visit(t, mallory, link)
	authorize := continueLink(page)
	if authorize == "" {
		t.Fatalf("no Continue button on %q", page)
	}
	code, body = visit(t, vera.Browser(), authorize)
	if code != http.StatusBadRequest || !strings.Contains(body, "This browser did not open the Connect link") {
		t.Errorf("Todoist's address opened in another browser: HTTP %d %q, want 400", code, body)
	}
	if len(vera.Tokens()) != 0 {
		t.Error("Vera's Todoist was connected to Mallory's chat")
	}

	// Ann connects her own account: the chat names it.
	ann := te.svc.NewAccount(todoisttest.WithUser("Ann Example", "ann@example.com"))
	pushFrom(te.tg, 44, "ann", "/connect")
	waitFor(t, "Ann's Connect link", func() bool { return connectLink(lastText(te.tg, 44)) != "" })
	if code, body := open(t, ann.Browser(), connectLink(lastText(te.tg, 44))); code != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("Ann connects: HTTP %d %q", code, body)
	}
	waitFor(t, "the account named in the chat", func() bool {
		return strings.Contains(lastText(te.tg, 44), "Connected the Todoist account of Ann Example (ann@example.com)")
	})
	if n := len(ann.Tokens()); n != 1 {
		t.Errorf("Ann has %d tokens, want 1", n)
	}
}

// TestVoiceMaxHoldsWithoutATrustworthyDuration: TIDYBOT_VOICE_MAX (1m
// here) holds for audio sent as a document (no duration) and for a voice
// note that claims 0 s or 3 s: a file larger than a minute of Opus at its
// highest bitrate is refused before it is downloaded, and a small one
// whose stream plays longer is refused before it is transcribed (issue
// 21, item 6).
func TestVoiceMaxHoldsWithoutATrustworthyDuration(t *testing.T) {
	big := append(bytes.Clone(openaitest.VoiceNote), make([]byte, 19<<20)...) // a voice note padded to 19 MB
	tests := []struct {
		name       string
		push       func(tg *telegramtest.Server) string
		want       string
		downloaded bool
	}{
		{"document without duration, 19 MB", func(tg *telegramtest.Server) string {
			id := tg.AddFile("documents", ".ogg", big)
			tg.PushAudioDocument(42, 42, id, "recording.ogg", "audio/ogg")
			return id
		}, "that audio file is too large (19.9 MB): I take voice notes of up to 1m0s, at most 3.8 MB in this format", false},
		{"voice note claiming 0 s, 19 MB", func(tg *telegramtest.Server) string {
			id := tg.AddFile("voice", ".oga", big)
			tg.PushVoice(42, 42, id, 0)
			return id
		}, "that audio file is too large (19.9 MB)", false},
		{"voice note claiming 3 s, playing 90 s", func(tg *telegramtest.Server) string {
			id := tg.AddFile("voice", ".oga", openaitest.OggOpus(90*time.Second))
			tg.PushVoice(42, 42, id, 3)
			return id
		}, "that voice note is 1m30s long; I take notes of up to 1m0s", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.model.Close()
			e.model = openaitest.New(openaitest.FromAgent(e.scen.reply), openaitest.WithTranscripts(func(openaitest.Transcription) string { return "hello" }))
			t.Cleanup(e.model.Close)
			e.cfg.OpenAIBaseURL, e.cfg.TranscribeModel, e.cfg.VoiceMax = e.model.URL, "gpt-transcribe", time.Minute
			tg := serveTelegram(t, e)
			id := tt.push(tg)
			waitFor(t, "the answer", func() bool { return lastText(tg, 42) != "" })
			if got := lastText(tg, 42); !strings.Contains(got, tt.want) {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
			if n := len(e.model.Transcriptions()); n != 0 {
				t.Errorf("%d transcriptions", n)
			}
			if got := tg.Downloads(id) > 0; got != tt.downloaded {
				t.Errorf("downloaded: %v, want %v", got, tt.downloaded)
			}
		})
	}
}

// TestVoiceMaxHoldsByTheDecodedLength: an MP3 sent as a document, small
// enough for a minute at 320 kbit/s, that the speech server (whisper-1,
// verbose_json) decodes to 90 s: its transcript is not used, the person
// is told, and nothing runs (issue 21, item 6).
func TestVoiceMaxHoldsByTheDecodedLength(t *testing.T) {
	e := newEnv(t)
	e.model.Close()
	e.model = openaitest.New(openaitest.FromAgent(e.scen.reply), openaitest.WithTranscripts(func(openaitest.Transcription) string { return "delete everything" }),
		openaitest.WithAudioLength(func(openaitest.Transcription) time.Duration { return 90 * time.Second }))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL, e.cfg.TranscribeModel, e.cfg.VoiceMax = e.model.URL, "whisper-1", time.Minute
	tg := serveTelegram(t, e)
	id := tg.AddFile("documents", ".mp3", append([]byte("ID3\x04"), make([]byte, 700_000)...))
	tg.PushAudioDocument(42, 42, id, "talk.mp3", "audio/mpeg")
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) != "" })
	if got, want := lastText(tg, 42), "that voice note is 1m30s long; I take notes of up to 1m0s"; !strings.Contains(got, want) {
		t.Errorf("answer %q, want %q", got, want)
	}
	if n := len(e.model.Transcriptions()); n != 1 {
		t.Errorf("%d transcriptions, want 1", n)
	}
	tg.PushText(42, 42, "hello")
	waitFor(t, "the next answer", func() bool { return lastText(tg, 42) == "You said: hello" })
	for _, m := range tg.Messages(42) {
		if strings.Contains(m.Text, "delete everything") {
			t.Errorf("the transcript of a note over the limit was used: %q", m.Text)
		}
	}
}

// TestSlackEventsAPIPoisonEventIsCounted: a signed Events API body that
// does not decode gets a 200 (a non-2xx only buys Slack's retries) and
// is counted in /metrics.
func TestSlackEventsAPIPoisonEventIsCounted(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = freeAddr(t)
	e.cfg.AllowedUsers = []string{"slack:U1"}
	_, base := serveSlack(t, e)
	var poison map[string]any
	_ = json.Unmarshal(slacktest.MessageEvent("Ev1", "D1", "im", "U1", "x", "1.1", ""), &poison)
	poison["event"].(map[string]any)["text"] = 12345
	body, _ := json.Marshal(poison)
	if code := postSigned(t, base+"/slack/events", "application/json", body, slackSecret); code != http.StatusOK {
		t.Errorf("an event that does not decode: HTTP %d, want 200", code)
	}
	metric := `tidybot_events_total{outcome="undecodable",platform="slack"} 1`
	if _, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics"); !strings.Contains(body, metric) {
		t.Errorf("/metrics lacks %s", metric)
	}
}
