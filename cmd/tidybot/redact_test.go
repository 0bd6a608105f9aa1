package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// echoingTodoist is the fake Todoist behind a proxy that answers GET
// /labels with an API v1 error body echoing the request's token, as a
// misbehaving upstream or proxy may. The body has API v1's error shape
// ({"error","error_code","error_tag","http_code"}: see agent/todoist's
// apiError, from developer.todoist.com/api/v1 "Errors").
func echoingTodoist(t *testing.T, e *env) string {
	t.Helper()
	target, err := url.Parse(e.todo.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/labels") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"Invalid argument: %s","error_code":20,"error_tag":"INVALID_ARGUMENT_VALUE","http_code":400,"error_extra":{}}`,
				strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// chatLogged runs `tidybot chat` at log level debug and returns stdout and
// the logs.
func (e *env) chatLogged(t *testing.T, input string) (string, string) {
	t.Helper()
	var out, logs bytes.Buffer
	e.cfg.LogLevel = "debug"
	m := &Main{Args: []string{"chat"}, Stdin: strings.NewReader(input), Stdout: &out, Stderr: &logs, Config: &e.cfg}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("chat: %v\nstdout:\n%s\nlogs:\n%s", err, out.String(), logs.String())
	}
	return out.String(), logs.String()
}

func TestTodoistEchoingItsTokenIsRedacted(t *testing.T) {
	e := newEnv(t)
	e.cfg.TodoistURL = echoingTodoist(t, e)
	e.model.Close()
	e.model = openaitest.New(openaitest.Replies(
		openaitest.Call(agent.ActGetLabels, `{}`),
		openaitest.Call(agent.ActFinalAnswer, `{"answer":"I could not read your labels."}`),
	))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	token := e.todo.Token

	out, logs := e.chatLogged(t, "list my labels\n")
	mustContain(t, out, "I could not read your labels.")
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	obs := fmt.Sprint(reqs[1].Messages)
	if !strings.Contains(obs, "Invalid argument: "+agent.Redacted) {
		t.Errorf("the observation does not report the error, redacted:\n%s", obs)
	}
	for i, r := range reqs {
		if strings.Contains(fmt.Sprintf("%+v", r), token) {
			t.Errorf("model request %d holds the Todoist token", i)
		}
	}
	if bytes.Contains(e.stored(t), []byte(token)) {
		t.Error("the database holds the Todoist token")
	}
	if strings.Contains(logs, token) || strings.Contains(out, token) {
		t.Errorf("the token is in the logs or the chat:\n%s\n%s", logs, out)
	}
}

func TestModelAPIEchoingItsKeyIsRedacted(t *testing.T) {
	const key = "sk-proj-EchoedKey0123456789abcdef"
	for _, tt := range []struct {
		name  string
		reply openaitest.Reply
		chat  string // what the chat must say
	}{
		// A 400 is shown to the user with the API's message.
		{"400", openaitest.Error(http.StatusBadRequest, "Incorrect API key provided: "+key+"."), "Incorrect API key provided: " + agent.Redacted},
		// A 401's message is kept for the logs only.
		{"401", openaitest.Error(http.StatusUnauthorized, "Incorrect API key provided: "+key+" (proj-EchoedKey0123456789abcdef)."), "rejected the key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.model.Close()
			e.model = openaitest.New(openaitest.Replies(tt.reply))
			t.Cleanup(e.model.Close)
			e.cfg.OpenAIBaseURL, e.cfg.OpenAIKey = e.model.URL, key
			e.cfg.LogLevel = "debug"
			// The run fails: chat from a pipe says so in its error too.
			out, logs, err := e.runChat(t, "hello\n", false)
			if err == nil || !strings.Contains(err.Error(), "a run failed") || strings.Contains(err.Error(), key) {
				t.Errorf("chat: err = %v; want a run failed, without the key", err)
			}
			mustContain(t, out, tt.chat)
			if !strings.Contains(logs, "run error") {
				t.Errorf("the failure is not logged:\n%s", logs)
			}
			db := e.stored(t)
			for _, secret := range []string{key, strings.TrimPrefix(key, "sk-")} {
				if strings.Contains(out, secret) || strings.Contains(logs, secret) {
					t.Errorf("the key is in the chat or the logs:\nchat:\n%s\nlogs:\n%s", out, logs)
				}
				if bytes.Contains(db, []byte(secret)) {
					t.Error("the database holds the key")
				}
			}
		})
	}
}

// TestLoggerRedactsEverySecret: the logger Main gives the bot and the
// adapters hides every configured secret, in both formats, whatever the
// attribute's kind.
func TestLoggerRedactsEverySecret(t *testing.T) {
	cfg := validConfig()
	cfg.TelegramToken, cfg.TelegramWebhookSecret = "123456:AAH-telegramSecretPart", "webhookSecret_0123"
	cfg.SlackBotToken, cfg.SlackAppToken, cfg.SlackSigningSecret = "xoxb-1111-2222-slackbotsecret", "xapp-1-A111-slackappsecret", "8f742231b10e8888abcd99yyyzzz85a5"
	secrets := cfg.Secrets()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			cfg.LogFormat, cfg.LogLevel = format, "debug"
			var logs bytes.Buffer
			m := &Main{Stderr: &logs, redact: agent.NewRedactor(secrets...)}
			log := m.logger(cfg, false)
			for _, s := range secrets {
				log.With(slog.String("token", s)).WithGroup("slack").Error("invalid_auth token="+s,
					slog.Any("err", fmt.Errorf("post https://api.telegram.org/bot%s/getMe: %w", s, errors.New("401"))),
					slog.Group("req", slog.String("auth", "Bearer "+s)))
			}
			for _, s := range append(secrets, strings.TrimPrefix(cfg.OpenAIKey, "sk-")) {
				if s != "" && strings.Contains(logs.String(), s) {
					t.Errorf("the log shows %q:\n%s", s, logs.String())
				}
			}
			if !strings.Contains(logs.String(), agent.Redacted) {
				t.Errorf("nothing was redacted:\n%s", logs.String())
			}
		})
	}
}
