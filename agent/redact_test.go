package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const (
	testToken = "0123456789abcdef0123456789abcdef01234567"
	testKey   = "sk-proj-Abc123Def456Ghi789"
	tgToken   = "123456:AAH-secretPart_xyz"
)

func TestRedactorString(t *testing.T) {
	r := NewRedactor(testToken, testKey, tgToken, "", "short")
	for _, tt := range []struct {
		name, in, want string
	}{
		{"todoist token", "Authorization: Bearer " + testToken + " rejected", "Authorization: Bearer [redacted] rejected"},
		{"openai key", "Incorrect API key provided: " + testKey + ".", "Incorrect API key provided: [redacted]."},
		{"openai key without sk-", "key proj-Abc123Def456Ghi789 is invalid", "key [redacted] is invalid"},
		{"telegram token in a URL", "Post https://api.telegram.org/bot" + tgToken + "/getMe: EOF", "Post https://api.telegram.org/bot[redacted]/getMe: EOF"},
		{"telegram token escaped", "token=123456%3AAAH-secretPart_xyz", "token=[redacted]"},
		{"twice", testToken + testToken, "[redacted][redacted]"},
		{"too short to hide", "a short word", "a short word"},
		{"nothing", "no secret here", "no secret here"},
		// The text with no secret is returned without a copy, the rest
		// replaced: a secret at either end, alone, or only begun.
		{"the whole text", testToken, "[redacted]"},
		{"at the end", "the token is " + testToken, "the token is [redacted]"},
		{"a secret begun at the end", "the token starts " + testToken[:20], "the token starts " + testToken[:20]},
		{"after the start of another", "0123456789" + testKey, "0123456789[redacted]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	var none *Redactor
	if got := none.String(testToken); got != testToken {
		t.Errorf("nil Redactor changed the text: %q", got)
	}
	empty := NewRedactor("", "  ")
	if got := empty.String(testToken); got != testToken {
		t.Errorf("a Redactor without secrets changed the text: %q", got)
	}
	// A secret learnt later is hidden even when none was configured
	// (team mode learns each person's token as it is loaded).
	empty.Add(testToken)
	if got := empty.String("token " + testToken); strings.Contains(got, testToken) {
		t.Errorf("a secret added to an empty Redactor leaked: %q", got)
	}
}

func TestRedactorError(t *testing.T) {
	r := NewRedactor(testToken)
	cause := &Error{Code: ErrInvalid, Message: "bad token " + testToken}
	err := r.Error(fmt.Errorf("list: %w", cause))
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error kept the secret: %v", err)
	}
	if ErrorCodeOf(err) != ErrInvalid {
		t.Errorf("the redacted error lost its cause")
	}
	plain := errors.New("plain")
	if r.Error(plain) != plain {
		t.Error("an error without a secret was replaced")
	}
}

type stringer struct{}

func (stringer) String() string { return "stringer " + testKey }

func TestRedactorHandler(t *testing.T) {
	r := NewRedactor(testToken, testKey)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			log := slog.New(r.Handler(h))
			log.With(slog.String("token", testToken)).WithGroup("req").Info("calling with "+testKey,
				slog.Any("err", fmt.Errorf("todoist: %w", errors.New("echo "+testToken))),
				slog.Group("auth", slog.String("header", "Bearer "+testToken)),
				slog.Any("map", map[string]string{"k": testToken}),
				slog.Any("stringer", stringer{}),
				slog.Int("n", 3))
			out := buf.String()
			if strings.Contains(out, testToken) || strings.Contains(out, testKey) || strings.Contains(out, "Abc123Def456") {
				t.Errorf("log line holds a secret:\n%s", out)
			}
			if strings.Count(out, Redacted) != 6 {
				t.Errorf("want 6 redactions:\n%s", out)
			}
			if !strings.Contains(out, "n=3") && !strings.Contains(out, `"n":3`) {
				t.Errorf("a plain value was changed:\n%s", out)
			}
		})
	}
}

// TestRedactorHandlerAttrsInOrder: the attributes a logger is given
// (With, kept until it logs) come out as the handler beneath would write
// them, groups included, and loggers made from one another or from the
// same one never share attributes; a secret in one is hidden.
func TestRedactorHandlerAttrsInOrder(t *testing.T) {
	r := NewRedactor(testToken)
	var got, want bytes.Buffer
	plain := slog.NewTextHandler(&want, nil)
	red := r.Handler(slog.NewTextHandler(&got, nil))
	for _, h := range []slog.Handler{plain, red} {
		base := slog.New(h).With("a", 1, "z", 0)
		one := base.With("b", 2)
		two := base.With("c", 3) // beside one, from the same array
		one.Info("one")
		two.Info("two")
		one.WithGroup("g").With("d", 4).WithGroup("h").Info("grouped", "e", 5)
		base.With("f", 6).With().WithGroup("").Info("again", "g", 7)
		two.Info("two again")
		c1, c2 := one.With("x", 8), one.With("y", 9)
		c1.Info("c1")
		c2.Info("c2")
	}
	strip := func(s string) string { // the times differ
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if _, rest, ok := strings.Cut(l, " level="); ok {
				l = rest
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	if strip(got.String()) != strip(want.String()) {
		t.Errorf("through the Redactor:\n%s\nwant:\n%s", got.String(), want.String())
	}
	got.Reset()
	slog.New(red).With("token", testToken).With("n", 1).Info("hello")
	if strings.Contains(got.String(), testToken) || !strings.Contains(got.String(), "token="+Redacted) {
		t.Errorf("a secret given with With was not hidden: %s", got.String())
	}
}

// echoTasks is a Todoist whose error bodies echo its token, as a real
// service or a proxy may.
type echoTasks struct{ *memTasks }

func (echoTasks) Labels(context.Context) ([]Label, error) {
	return nil, &Error{Code: ErrInvalid, Message: "Todoist rejected GET /labels: invalid token " + testToken}
}

func TestEngineRedactsObservationsAndTranscript(t *testing.T) {
	s := &script{replies: []Response{
		tool(ActGetLabels, `{}`),
		tool(ActFinalAnswer, `{"answer":"your token is `+testToken+`"}`),
	}}
	e := New(s, echoTasks{newTalkTasks()}, Config{Redact: NewRedactor(testToken)})
	var saved [][]byte
	out := e.Start(t.Context(), Input{Instruction: "list labels, my token is " + testToken}, Hooks{
		Save: func(_ context.Context, tr *Transcript) error {
			b, err := json.Marshal(tr)
			saved = append(saved, b)
			return err
		},
	})
	if out.Status != StatusDone {
		t.Fatalf("status %s (%v)", out.Status, out.Err)
	}
	if len(s.reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(s.reqs))
	}
	for i, req := range s.reqs {
		if b, _ := json.Marshal(req); bytes.Contains(b, []byte(testToken)) {
			t.Errorf("model request %d holds the token:\n%s", i, b)
		}
	}
	if obs := s.reqs[1].Messages[len(s.reqs[1].Messages)-1].Content; !strings.Contains(obs, "invalid token "+Redacted) {
		t.Errorf("observation %q does not say what failed", obs)
	}
	for i, b := range saved {
		if bytes.Contains(b, []byte(testToken)) {
			t.Errorf("saved transcript %d holds the token", i)
		}
	}
	if strings.Contains(out.Answer, testToken) {
		t.Errorf("answer holds the token: %q", out.Answer)
	}
	if b, _ := json.Marshal(out.Transcript); bytes.Contains(b, []byte(testToken)) {
		t.Error("the outcome's transcript holds the token")
	}
}

func TestRedactorAddHidesLaterSecrets(t *testing.T) {
	r := NewRedactor("configured-secret")
	const tok = "person-token-0123456789"
	if got := r.String("token " + tok); got != "token "+tok {
		t.Fatalf("before Add: %q", got)
	}
	r.Add(tok)
	if got, want := r.String("a configured-secret and "+tok), "a "+Redacted+" and "+Redacted; got != want {
		t.Errorf("after Add: got %q, want %q", got, want)
	}
	before := r.r
	r.Add(tok, " "+tok)
	if r.r != before || len(r.secrets) != 2 {
		t.Errorf("adding a known secret again rebuilt the redactor (%d secrets)", len(r.secrets))
	}
	var nilR *Redactor
	nilR.Add(tok) // no panic
}

// unauthorizedEchoTasks fails every label read as unauthorized, echoing
// its token in the message a user is shown.
type unauthorizedEchoTasks struct{ *memTasks }

func (unauthorizedEchoTasks) Labels(context.Context) ([]Label, error) {
	return nil, &Error{Code: ErrUnauthorized, Message: "Todoist refused the token " + testToken}
}

// A run that fails on an error whose user message holds a secret answers
// with the redacted message.
func TestEngineRedactsTheFailureAnswer(t *testing.T) {
	s := &script{replies: []Response{tool(ActGetLabels, `{}`)}}
	e := New(s, unauthorizedEchoTasks{newTalkTasks()}, Config{Redact: NewRedactor(testToken)})
	out := e.Start(t.Context(), Input{Instruction: "list labels"}, Hooks{})
	if out.Status != StatusFailed {
		t.Fatalf("status %s %q, want failed", out.Status, out.Answer)
	}
	if strings.Contains(out.Answer, testToken) || !strings.Contains(out.Answer, Redacted) {
		t.Errorf("answer = %q, want the token redacted", out.Answer)
	}
}

// BenchmarkRedactorString is the redaction of a text with no secret in
// it (most of what a run sends and stores: the system prompt, the
// history): no allocation.
//
//	go test ./agent -run '^$' -bench RedactorString -benchmem
func BenchmarkRedactorString(b *testing.B) {
	r := NewRedactor(testToken, testKey, tgToken)
	text := strings.Repeat("Move the milk task to Groceries, then tell me what is due today. ", 40)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if r.String(text) != text {
			b.Fatal("a text without a secret was changed")
		}
	}
}

// learningTasks learns a secret (Redactor.Add) as it reads the labels,
// as team mode learns a person's token once it is loaded.
type learningTasks struct {
	*memTasks
	r      *Redactor
	secret string
}

func (l learningTasks) Labels(ctx context.Context) ([]Label, error) {
	l.r.Add(l.secret)
	return l.memTasks.Labels(ctx)
}

// TestEngineRedactsWithSecretsLearntDuringTheRun: the messages a run
// redacted before (its instruction, its history) are redacted again once
// a secret is learnt, so that neither the next model call nor the saved
// transcript holds it; and what comes later is redacted too.
func TestEngineRedactsWithSecretsLearntDuringTheRun(t *testing.T) {
	const secret = "learnt-secret-0123456789"
	r := NewRedactor(testToken)
	s := &script{replies: []Response{
		tool(ActGetLabels, `{}`),
		tool(ActFinalAnswer, `{"answer":"done, `+secret+`"}`),
	}}
	e := New(s, learningTasks{memTasks: newTalkTasks(), r: r, secret: secret}, Config{Redact: r})
	var saved [][]byte
	out := e.Start(t.Context(), Input{Instruction: "list labels; " + secret + " and " + testToken,
		History: []HistoryMessage{{Role: RoleUser, Text: "earlier: " + secret}, {Role: RoleAssistant, Text: "noted"}}}, Hooks{
		Save: func(_ context.Context, tr *Transcript) error {
			b, err := json.Marshal(tr)
			saved = append(saved, b)
			return err
		},
	})
	if out.Status != StatusDone || len(s.reqs) != 2 {
		t.Fatalf("status %s (%v), %d model calls", out.Status, out.Err, len(s.reqs))
	}
	if b, _ := json.Marshal(s.reqs[0]); bytes.Contains(b, []byte(testToken)) {
		t.Errorf("the first call holds a secret: %s", b)
	}
	if b, _ := json.Marshal(s.reqs[1]); bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(testToken)) {
		t.Errorf("the second call holds a secret: %s", b)
	}
	// Saved once before the labels were read (the secret not yet
	// known), and at the end.
	if len(saved) < 2 || bytes.Contains(saved[len(saved)-1], []byte(secret)) {
		t.Errorf("the transcript saved at the end holds the secret learnt (%d saves)", len(saved))
	}
	if strings.Contains(out.Answer, secret) {
		t.Errorf("answer holds the secret: %q", out.Answer)
	}
}
