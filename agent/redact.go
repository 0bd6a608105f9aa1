package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces a secret wherever a Redactor finds one.
const Redacted = "[redacted]"

// minSecret is the shortest value a Redactor hides: a shorter "secret"
// would blank out ordinary words and could not be a real credential.
const minSecret = 6

// Redactor hides configured secrets (API tokens, signing secrets) in text
// that leaves the process: log lines, chat messages, observations sent to
// the model and transcripts stored. Upstream services echo credentials in
// error bodies, so every such text goes through one Redactor built from
// every secret. A nil *Redactor hides nothing.
type Redactor struct {
	mu      sync.RWMutex // protects the fields below
	secrets []string
	r       *strings.Replacer
	// gen counts the changes of secrets (Add): a text redacted before
	// one may hold a secret learnt since.
	gen uint64
}

// NewRedactor returns a Redactor hiding each non-empty secret, in its
// plain, URL-escaped and (for OpenAI-style keys) unprefixed forms. It is
// never nil, even with nothing to hide yet, so secrets learnt later (Add)
// are hidden too.
func NewRedactor(secrets ...string) *Redactor {
	return &Redactor{secrets: secrets, r: replacer(secrets)}
}

// Add hides more secrets from now on: a secret learnt while running,
// such as a person's Todoist token once it is loaded. It is safe to call
// while the Redactor is in use; on a nil Redactor it does nothing.
func (r *Redactor) Add(secrets ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append([]string(nil), r.secrets...)
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	if len(all) == len(r.secrets) {
		return // nothing new: the replacer stays
	}
	if nr := replacer(all); nr != nil {
		r.secrets, r.r = all, nr
		r.gen++
	}
}

// generation is the number of times the secrets changed (Add); 0 for a
// nil Redactor.
func (r *Redactor) generation() uint64 {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// replacer returns the strings.Replacer hiding every form of secrets, or
// nil when there is nothing to hide.
func replacer(secrets []string) *strings.Replacer {
	seen := map[string]bool{}
	var forms []string
	add := func(s string, least int) {
		if len(s) >= least && !seen[s] {
			seen[s] = true
			forms = append(forms, s)
		}
	}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		add(s, minSecret)
		add(url.QueryEscape(s), minSecret)
		add(url.PathEscape(s), minSecret)
		// OpenAI keys are echoed without their sk- prefix by some
		// servers and proxies; the rest alone is still the secret.
		if rest, ok := strings.CutPrefix(s, "sk-"); ok {
			add(rest, 8)
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// The longest form first, so that a secret containing another is
	// hidden whole (strings.Replacer tries old strings in argument order
	// at each position).
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return strings.NewReplacer(pairs...)
}

func (r *Redactor) replace(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.r == nil {
		return s // nothing to hide yet
	}
	// Most texts hold no secret: they are checked without a copy
	// (strings.Replacer's Replace copies s whenever it has more than one
	// secret to look for, even when it finds none), and only one that
	// holds a secret is replaced.
	w := sameWriters.Get().(*sameWriter)
	*w = sameWriter{s: s}
	_, err := r.r.WriteString(w, s)
	same := err == nil && w.n == len(s)
	*w = sameWriter{}
	sameWriters.Put(w)
	if same {
		return s
	}
	return r.r.Replace(s)
}

// A sameWriter checks that what a strings.Replacer writes is s itself,
// and stops it (errChanged) at the first byte that differs.
type sameWriter struct {
	s string
	n int // the bytes written so far, each equal to s's
}

var (
	sameWriters = sync.Pool{New: func() any { return new(sameWriter) }}
	errChanged  = errors.New("redactor: text changed")
)

func (w *sameWriter) WriteString(p string) (int, error) {
	if len(p) > len(w.s)-w.n || w.s[w.n:w.n+len(p)] != p {
		return 0, errChanged
	}
	w.n += len(p)
	return len(p), nil
}

func (w *sameWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.s)-w.n || w.s[w.n:w.n+len(p)] != string(p) {
		return 0, errChanged
	}
	w.n += len(p)
	return len(p), nil
}

// String returns s with every secret replaced by Redacted.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r.replace(s)
}

// Error returns err with its message redacted, or err itself when its
// message holds no secret (so errors.Is and errors.As still work on it).
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	if red := r.replace(msg); red != msg {
		return redactedError{msg: red, err: err}
	}
	return err
}

// redactedError is an error whose message had a secret. It unwraps to the
// original for errors.Is and errors.As, and prints only the redacted text.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Transcript redacts, in place, every text of t that is sent to the model
// or shown to the user: the messages (observations included), the answer
// the actions asked for and the pending question. Planned writes and
// what was read from the to-do service are left as they are: a resumed run
// must re-send exactly what it planned.
func (r *Redactor) Transcript(t *Transcript) {
	r.transcriptFrom(t, 0)
}

// transcriptFrom is Transcript, but for the messages before index from,
// which the caller knows were redacted with the same secrets and have not
// changed since (runner.redact).
func (r *Redactor) transcriptFrom(t *Transcript, from int) {
	if r == nil || t == nil {
		return
	}
	t.Instruction = r.String(t.Instruction)
	for i := from; i < len(t.Messages); i++ {
		m := &t.Messages[i]
		m.Content = r.String(m.Content)
		for j := range m.ToolCalls {
			m.ToolCalls[j].Arguments = r.String(m.ToolCalls[j].Arguments)
		}
	}
	for i := range t.Calls {
		if red := r.String(string(t.Calls[i].Args)); red != string(t.Calls[i].Args) {
			t.Calls[i].Args = json.RawMessage(red)
		}
	}
	for k, n := range t.Seen {
		if red := r.String(k); red != k {
			delete(t.Seen, k)
			t.Seen[red] += n
		}
	}
	t.Answer = r.String(t.Answer)
	if w := t.Wait; w != nil {
		w.Question = r.String(w.Question)
		for i := range w.Options {
			w.Options[i] = r.String(w.Options[i])
		}
	}
}

// Handler returns a slog.Handler that redacts the message and every
// attribute (errors, groups and values printed with fmt included) before
// passing a record to h.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	return &redactHandler{r: r, base: h}
}

// A redactHandler redacts what it passes to base. The attributes a
// logger is given (Logger.With) wait in pending until a record is
// logged: most loggers made for one message or job log nothing, and
// neither the redaction nor the handler's own formatting of them is
// done for those.
type redactHandler struct {
	r       *Redactor
	base    slog.Handler
	pending []slog.Attr // base's attributes yet to be added, redacted

	once sync.Once
	h    slog.Handler // base with pending, once made (handler)
}

// handler is base with the pending attributes, redacted.
func (h *redactHandler) handler() slog.Handler {
	if len(h.pending) == 0 {
		return h.base
	}
	h.once.Do(func() {
		red := make([]slog.Attr, len(h.pending))
		for i, a := range h.pending {
			red[i] = h.r.attr(a)
		}
		h.h = h.base.WithAttrs(red)
	})
	return h.h
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.base.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.handler().Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	// Clipped, so that two loggers made from this one never share
	// the array their attributes are appended to.
	return &redactHandler{r: h.r, base: h.base, pending: append(slices.Clip(h.pending), as...)}
}

// WithGroup adds the pending attributes first: they are outside the
// group.
func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{r: h.r, base: h.handler().WithGroup(name)}
}

// attr redacts one attribute. Values that are not strings are printed
// with fmt to be checked; one that holds a secret is logged as its
// redacted text, any other is kept as it is.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = r.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		// fmt prints errors and Stringers by their methods, and survives
		// a method that panics on a nil receiver.
		s := fmt.Sprintf("%+v", v.Any())
		if red := r.String(s); red != s {
			return slog.String(a.Key, red)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
