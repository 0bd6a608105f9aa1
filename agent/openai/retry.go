package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/retry"
)

// send makes one call, retrying 429s, 5xx answers and network errors
// within the retry budget; call returns the answer's headers with its
// error. edit says how the JSON body must be changed on its way out.
// Every error send returns is the context's or wraps an *agent.Error with
// a sanitized cause.
func (c *Client) send(ctx context.Context, edit bodyEdit, call func(ctx context.Context) (http.Header, error)) error {
	ctx = context.WithValue(ctx, editKey{}, edit)
	p := retry.Policy{MaxWait: c.cfg.MaxRetryWait, Sleep: c.cfg.Sleep, Backoff: retry.Backoff{Base: c.cfg.BackoffBase, Max: c.cfg.BackoffMax},
		OnRetry: func(attempt int, wait time.Duration, err error) {
			c.log.DebugContext(ctx, "openai: retrying", slog.String("host", c.host), slog.Int("attempt", attempt),
				slog.Duration("wait", wait), slog.String("error", err.Error()))
		}}
	return p.Do(ctx, func(n int) (time.Duration, error) {
		header, err := call(ctx)
		if err == nil || ctx.Err() != nil {
			return -1, err
		}
		// go-openai sets the answer's headers on the response before it
		// looks at the status, so Retry-After is readable here.
		return c.classify(err, header, n)
	})
}

// classify turns a go-openai error into an *agent.Error and says how long
// to wait before the next attempt (negative: the error is final).
func (c *Client) classify(err error, header http.Header, n int) (time.Duration, error) {
	var (
		re *goopenai.RequestError
		ae *goopenai.APIError
		e  *apiError
	)
	switch {
	case errors.As(err, &re):
		e = &apiError{Status: re.HTTPStatusCode}
		if errors.As(re.Err, &ae) {
			e.fill(ae)
		} else {
			e.Message = truncate(strings.TrimSpace(string(re.Body)), 300)
		}
	case errors.As(err, &ae):
		e = &apiError{Status: ae.HTTPStatusCode}
		e.fill(ae)
	default:
		return c.transportError(err, n)
	}
	e.Message = c.redact(e.Message)
	e.Type = c.redact(e.Type)
	e.Param = c.redact(e.Param)
	e.Code = c.redact(e.Code)

	switch s := e.Status; {
	case s == http.StatusUnauthorized:
		return -1, &agent.Error{Code: agent.ErrUnauthorized, Message: "the model API rejected the key: check OPENAI_API_KEY", Err: e}
	case s == http.StatusForbidden:
		return -1, &agent.Error{Code: agent.ErrForbidden, Message: "the model API refused access (HTTP 403): check OPENAI_API_KEY and OPENAI_MODEL", Err: e}
	case s == http.StatusNotFound && routeMissing(e):
		return -1, &agent.Error{Code: agent.ErrInvalid, Err: e,
			Message: fmt.Sprintf("the model API at %s has no such endpoint (HTTP 404): check OPENAI_BASE_URL and OPENAI_API", c.host)}
	case s == http.StatusNotFound && e.Code != "model_not_found" && e.Param != "":
		return -1, &agent.Error{Code: agent.ErrInvalid, Err: e, Message: "the model API refused the request (HTTP 404): " + truncate(e.Message, 300)}
	case s == http.StatusNotFound:
		return -1, &agent.Error{Code: agent.ErrInvalid, Err: e,
			Message: fmt.Sprintf("the model API at %s does not know model %q (HTTP 404): check OPENAI_MODEL and OPENAI_BASE_URL", c.host, c.model)}
	case s == http.StatusTooManyRequests && (e.Code == "insufficient_quota" || e.Type == "insufficient_quota"):
		return -1, &agent.Error{Code: agent.ErrRateLimited, Err: e,
			Message: "the model API account has no quota left: check the plan and billing of the OPENAI_API_KEY account"}
	case s == http.StatusTooManyRequests:
		return c.wait(header, n), &agent.Error{Code: agent.ErrRateLimited, Message: "the model API's rate limit is reached; try again in a minute", Err: e}
	case s >= 500 || s == http.StatusRequestTimeout || s == http.StatusConflict:
		return c.wait(header, n), &agent.Error{Code: agent.ErrServer, Message: fmt.Sprintf("the model API is having trouble (HTTP %d); try again later", s), Err: e}
	case e.Code == "context_length_exceeded":
		return -1, &agent.Error{Code: agent.ErrInvalid, Message: "the conversation is too long for the model (context_length_exceeded): try /reset", Err: e}
	case contextOverflow.MatchString(e.Message):
		return -1, &agent.Error{Code: agent.ErrInvalid, Err: e,
			Message: "the conversation and the reply do not fit the model's context (" + contextOverflow.FindString(e.Message) + "): lower TIDYBOT_MAX_TOKENS, or try /reset"}
	}
	if s := e.Status; s == http.StatusBadRequest && strings.Contains(strings.ToLower(e.Message+" "+e.Param), "image") {
		// A model without image input ("image_url is only supported by
		// certain models"; local servers in their own words).
		return -1, &agent.Error{Code: agent.ErrUnsupported, Err: e,
			Message: fmt.Sprintf("the model %s does not take images (HTTP 400): pick a vision model in OPENAI_MODEL, or set TIDYBOT_VISION=off", c.model)}
	}
	msg := fmt.Sprintf("the model API refused the request (HTTP %d)", e.Status)
	if e.Message != "" {
		msg += ": " + truncate(e.Message, 300)
	}
	return -1, &agent.Error{Code: agent.ErrInvalid, Message: msg, Err: e}
}

// transportError classifies an error with no HTTP answer: a network
// error or an unreadable body is retried, anything else (go-openai's own
// checks of the request) is final.
func (c *Client) transportError(err error, n int) (time.Duration, error) {
	cause := errors.New(c.redact(err.Error()))
	var (
		ue *url.Error
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, errTooLarge):
		// A server that sent this much once would again: not retried.
		return -1, &agent.Error{Code: agent.ErrServer, Message: fmt.Sprintf("the model API at %s sent an answer larger than %d MB; it was not used", c.host, c.cfg.MaxResponseBytes>>20), Err: cause}
	case errors.As(err, &ue):
		// Refused or unresolvable is not slowness: retry.Policy gives it
		// only a few attempts, and the message names the setting.
		if e := c.unreached(err); e != nil {
			return c.backoff(n), e
		}
		return c.backoff(n), &agent.Error{Code: agent.ErrServer, Message: "could not reach the model API at " + c.host, Err: cause}
	case errors.As(err, &se), errors.As(err, &te), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return c.backoff(n), &agent.Error{Code: agent.ErrServer, Message: "the model API at " + c.host + " sent an unreadable answer", Err: cause}
	}
	return -1, &agent.Error{Code: agent.ErrInvalid, Message: "the model request is not valid for " + c.model + ": " + c.redact(err.Error()), Err: cause}
}

// unreached returns the error for a server that could not be reached at
// all (retry.Unreached), or nil.
func (c *Client) unreached(err error) *agent.Error {
	return retry.Unreached(err, "the model API at "+c.host, "OPENAI_BASE_URL, and that the server there is running", errors.New(c.redact(err.Error())))
}

// wait returns the wait before retry n: what the server asked for, else
// the backoff.
func (c *Client) wait(header http.Header, n int) time.Duration {
	if d, ok := retryAfter(header, time.Now()); ok {
		return d
	}
	return c.backoff(n)
}

// backoff returns the wait before retry n (0-based) when the server did
// not say.
func (c *Client) backoff(n int) time.Duration {
	return retry.Backoff{Base: c.cfg.BackoffBase, Max: c.cfg.BackoffMax}.Wait(n)
}

// retryAfter reads how long the server asks to wait: OpenAI's
// retry-after-ms header, else Retry-After (seconds or an HTTP date), else
// OpenAI's x-ratelimit-reset-requests / -tokens ("1s", "6m0s": when the
// exhausted limit resets; see OpenAI's rate-limits guide, "Rate limits in
// headers").
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := retry.After(h, now); ok {
		return d, true
	}
	return rateLimitReset(h)
}

// rateLimitReset reads x-ratelimit-reset-requests and -tokens: the reset
// of a limit whose remaining count is 0, else the later of the two.
func rateLimitReset(h http.Header) (time.Duration, bool) {
	var all, exhausted []time.Duration
	for _, kind := range []string{"requests", "tokens"} {
		d, err := time.ParseDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + kind)))
		if err != nil || d < 0 {
			continue
		}
		all = append(all, d)
		if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+kind)) == "0" {
			exhausted = append(exhausted, d)
		}
	}
	if len(exhausted) > 0 {
		all = exhausted
	}
	if len(all) == 0 {
		return 0, false
	}
	return slices.Max(all), true
}

// apiError is an error answer of the model API with every secret
// removed. It is kept as the cause of an *agent.Error, for logs; go-openai's
// own errors are not, since they quote the server verbatim.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *apiError) fill(ae *goopenai.APIError) {
	e.Type = ae.Type
	e.Message = ae.Message
	if ae.Param != nil {
		e.Param = *ae.Param
	}
	switch code := ae.Code.(type) {
	case nil:
	case int:
		// go-openai decodes a null code as the number 0.
		if code != 0 {
			e.Code = fmt.Sprint(code)
		}
	default:
		e.Code = fmt.Sprint(code)
	}
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.Status)
	for _, s := range []string{e.Type, e.Code} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	if e.Param != "" {
		b.WriteString(" (param " + e.Param + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// secretPattern matches credentials a server might quote back: Bearer
// tokens and OpenAI-style keys.
var secretPattern = regexp.MustCompile(`(?i)(bearer\s+)\S+|\bsk-[A-Za-z0-9_*.\-]{6,}`)

// redact removes the API key, and anything that looks like a credential,
// from s.
func (c *Client) redact(s string) string {
	if c.key != "" {
		s = strings.ReplaceAll(s, c.key, "[redacted]")
	}
	return secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		if sub := secretPattern.FindStringSubmatch(m); sub[1] != "" {
			return sub[1] + "[redacted]"
		}
		return "sk-[redacted]"
	})
}

// formatUnsupported reports whether err is a server's refusal of the
// response format kind itself (as opposed to, say, an invalid schema):
// a 400 or 422 that names the format or response_format and says it is
// not supported.
func formatUnsupported(err error, kind agent.FormatKind) bool {
	var e *apiError
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest && e.Status != http.StatusUnprocessableEntity {
		return false
	}
	text := strings.ToLower(e.Message + " " + e.Param + " " + e.Code)
	for _, not := range []string{"invalid schema", "must contain the word"} {
		if strings.Contains(text, not) {
			return false
		}
	}
	named := false
	for _, w := range []string{"response_format", "response format", string(kind), "structured output", "json mode"} {
		if strings.Contains(text, w) {
			named = true
			break
		}
	}
	if !named {
		return false
	}
	for _, w := range []string{"not supported", "unsupported", "does not support", "doesn't support", "not implemented",
		"unknown", "unrecognized", "not allowed", "not permitted", "must be", "invalid value", "not available", "extra_forbidden"} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// bodyEdit is what the client changes in a JSON body go-openai made.
type bodyEdit struct {
	// drop are top-level fields the server does not support.
	drop map[string]bool
	// zeroTemperature adds "temperature":0, which go-openai's
	// `temperature,omitempty` drops; the server would then use its own
	// default (1 on OpenAI).
	zeroTemperature bool
	// tools is the request's "tools" array, left out of go-openai's
	// request and added here as Client.encodedTools encoded it: the
	// same tools on every call, encoded once.
	tools []byte
}

func (e bodyEdit) needed() bool { return e.zeroTemperature || len(e.drop) > 0 || len(e.tools) > 0 }

// editBody returns req with its JSON body changed as e says. The body
// is read once, into a buffer with room before it for what the usual
// edits add (see spliced), and sent from that buffer.
func editBody(req *http.Request, e bodyEdit) (*http.Request, error) {
	room := e.room()
	buf, err := readAfter(req.Body, req.ContentLength, room)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	body, ok := spliced(buf, room, e)
	if !ok {
		body = decodedEdit(buf[room:], e)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r, nil
}

// readAfter reads r to its end into a buffer whose first room bytes are
// left free; length is what r holds, when known (-1 or 0 if not).
func readAfter(r io.Reader, length int64, room int) ([]byte, error) {
	// bytes.Buffer reads while MinRead bytes are free: with them, a body
	// of the length given is read without growing the buffer.
	size := room + bytes.MinRead
	if length > 0 {
		size += int(length)
	}
	b := bytes.NewBuffer(make([]byte, room, size))
	if _, err := b.ReadFrom(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// room is the most the usual edits (spliced) add to a body: the tools
// and a zero temperature, each with a comma.
func (e bodyEdit) room() int {
	return len(`"tools":,`) + len(e.tools) + len(`"temperature":0,`)
}

// spliced is the JSON body at buf[room:] with the usual edits, on every
// call: the tools and a zero temperature added as its first members,
// without decoding and encoding the whole body again (the conversation,
// the tool schemas), which costs as much CPU as go-openai's own encoding.
// They are written in buf's first room bytes (e.room() of them), the
// body left where it is. ok is false when the edit needs the body decoded
// (a field dropped, or a body the scan cannot read): buf is then as it was.
func spliced(buf []byte, room int, e bodyEdit) (out []byte, ok bool) {
	body := buf[room:]
	if len(e.drop) > 0 {
		return nil, false
	}
	var add [2]member
	ms := add[:0]
	if len(e.tools) > 0 {
		ms = append(ms, member{"tools", e.tools})
	}
	if e.zeroTemperature {
		has, ok := hasMember(body, "temperature")
		if !ok {
			return nil, false
		}
		if !has {
			ms = append(ms, member{"temperature", []byte("0")})
		}
	}
	if len(ms) == 0 {
		return body, true
	}
	return spliceMembers(buf, room, ms)
}

// decodedEdit returns body changed as e says by decoding it; a body
// that is not a JSON object is returned as it is.
func decodedEdit(body []byte, e bodyEdit) []byte {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return body
	}
	for k := range e.drop {
		delete(fields, k)
	}
	if e.zeroTemperature {
		if _, ok := fields["temperature"]; !ok {
			fields["temperature"] = json.RawMessage("0")
		}
	}
	if len(e.tools) > 0 {
		fields["tools"] = e.tools
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return body
	}
	return b
}

// A member is a JSON object's "name":raw.
type member struct {
	name string
	raw  []byte
}

// spliceMembers returns the JSON object at buf[room:], which has none
// of ms, with ms as its first members, in their order; ok is false (and
// buf unchanged) when it is not an object. They are written into buf's
// first room bytes, the object's opening moved before them, when room is
// enough (else into a new buffer).
func spliceMembers(buf []byte, room int, ms []member) (out []byte, ok bool) {
	body := buf[room:]
	start := bytes.IndexFunc(body, func(r rune) bool { return !isJSONSpace(r) })
	if start < 0 || body[start] != '{' {
		return nil, false
	}
	empty := len(bytes.TrimFunc(body[start+1:], isJSONSpace)) == 1 // just "}"
	n := membersLen(ms, !empty)
	if n > room {
		bigger := make([]byte, n+len(body))
		copy(bigger[n:], body)
		buf, room = bigger, n
	}
	at := room - n
	// The opening (spaces and the brace) moves n bytes back; the members
	// go between it and the rest, which stays where it is.
	p := at + copy(buf[at:], buf[room:room+start+1])
	for i, m := range ms {
		if i > 0 {
			buf[p] = ','
			p++
		}
		buf[p] = '"'
		p++
		p += copy(buf[p:], m.name)
		buf[p], buf[p+1] = '"', ':'
		p += 2
		p += copy(buf[p:], m.raw)
	}
	if !empty {
		buf[p] = ','
	}
	return buf[at:], true
}

// membersLen is the length of ms written as members, with a comma after
// the last when more follow.
func membersLen(ms []member, more bool) int {
	n := len(ms) - 1
	if more {
		n++
	}
	for _, m := range ms {
		n += len(`"":`) + len(m.name) + len(m.raw)
	}
	return n
}

// hasMember reports whether body, a JSON object, has a top-level member
// name. It reads only the structure of the body, which comes from
// json.Marshal and so is valid JSON. ok is false when it cannot tell:
// body is not an object or is cut short, or a top-level key is written
// with escapes (which json.Marshal does not write for these names, but
// which may spell name).
func hasMember(body []byte, name string) (has, ok bool) {
	start := bytes.IndexFunc(body, func(r rune) bool { return !isJSONSpace(r) })
	if start < 0 || body[start] != '{' {
		return false, false
	}
	depth := 0
	key := false // the next string at depth 1 is a key
	for i := start; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			end := stringEnd(body, i)
			if end < 0 {
				return false, false
			}
			if depth == 1 && key {
				k := body[i+1 : end]
				if bytes.IndexByte(k, '\\') >= 0 {
					return false, false
				}
				if string(k) == name {
					return true, true
				}
				key = false
			}
			i = end
		case '{', '[':
			depth++
			key = depth == 1
		case '}', ']':
			depth--
			if depth == 0 {
				return false, true // the end of the object
			}
		case ',':
			key = depth == 1
		}
	}
	return false, false
}

// stringEnd returns the index of the quote that ends the JSON string
// starting at body[i], or -1 if it does not end.
func stringEnd(body []byte, i int) int {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(body[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// A quote after an odd number of backslashes is escaped; the
		// string's opening quote stops the count.
		n := 0
		for body[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j
		}
	}
}

func isJSONSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// hostOf returns the host of a base URL, for messages and logs (never
// the user info some URLs carry).
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "the configured OPENAI_BASE_URL"
	}
	return u.Host
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
