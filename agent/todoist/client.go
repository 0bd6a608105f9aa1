// Package todoist implements agent.Tasks against the Todoist API v1
// (https://api.todoist.com/api/v1) on net/http.
//
// Reads use the REST-style endpoints (GET /projects, /tasks, /tasks/filter,
// /sections, /labels, /user), always following next_cursor with limit=200,
// and Snapshot reads everything in one full /sync. Writes go out as /sync
// commands, at most 100 per request, with the caller's uuids as idempotency
// keys, so a batch re-sent after a crash or a timeout is applied once.
//
// Every error a method returns wraps an *agent.Error whose code classifies
// it and whose message a model can act on. The API token never appears in
// an error or a log line.
package todoist

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
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // users' time zones, on hosts without a zone database

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/retry"
)

// DefaultBaseURL is the Todoist API v1 base URL (TODOIST_API_URL).
const DefaultBaseURL = "https://api.todoist.com/api/v1"

// Defaults of the retry policy.
const (
	DefaultMaxRetryWait = 60 * time.Second
	DefaultBackoffBase  = 500 * time.Millisecond
	DefaultBackoffMax   = 20 * time.Second
)

// pageLimit is the largest page Todoist serves; the default is only 50.
const pageLimit = 200

// maxBody caps how much of a response the client reads.
const maxBody = 64 << 20

// Client is a Todoist API v1 client. It is safe for concurrent use.
type Client struct {
	token   string
	baseURL string
	hc      *http.Client
	log     *slog.Logger

	maxRetryWait time.Duration
	backoffBase  time.Duration
	backoffMax   time.Duration
	sleep        func(ctx context.Context, d time.Duration) error
	now          func() time.Time

	zoneMu sync.Mutex // protects the fields below
	// zone is the user's time zone as last read, trusted until zoneUntil.
	zone      *time.Location
	zoneUntil time.Time

	snapStore SnapshotStore
	snapMu    sync.Mutex // protects the fields below; held across a snapshot read
	// snap is the account's last snapshot (nil before the first read).
	snap       *snapState
	snapLoaded bool      // snap was looked up in snapStore
	snapSaved  time.Time // when snap was last saved in snapStore
}

var _ agent.TimeZoner = (*Client)(nil)

var _ agent.Tasks = (*Client)(nil)

// Option configures a Client.
type Option func(*Client)

// WithMaxRetryWait caps the total time the client waits between attempts of
// one request (after 429s, 5xx answers and network errors). Once the next
// wait would exceed it, the request fails with the last error. Zero turns
// retries off. The default is DefaultMaxRetryWait.
func WithMaxRetryWait(d time.Duration) Option {
	return func(c *Client) { c.maxRetryWait = max(d, 0) }
}

// WithBackoff sets the exponential backoff used when the server gives no
// Retry-After: the n-th retry waits about base·2ⁿ (with jitter), at most limit.
func WithBackoff(base, limit time.Duration) Option {
	return func(c *Client) {
		c.backoffBase = base
		c.backoffMax = limit
	}
}

// WithSleep replaces the function that waits between attempts; it must
// return ctx.Err() if ctx ends first. Tests use it to record waits instead
// of sleeping.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithClock sets the clock the client reads (for how long it trusts the
// user's time zone); the default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Client) { c.now = now }
}

// WithLogger sets the logger for retries (debug level). The default
// discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) { c.log = l }
}

// New returns a client for the account of token. baseURL is the API v1
// base URL (DefaultBaseURL when empty); hc should have a timeout (when nil,
// a client with a 30 s timeout is used, never http.DefaultClient).
func New(token, baseURL string, hc *http.Client, opts ...Option) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c := &Client{
		token:        token,
		baseURL:      strings.TrimRight(baseURL, "/"),
		hc:           hc,
		log:          slog.New(slog.DiscardHandler),
		maxRetryWait: DefaultMaxRetryWait,
		backoffBase:  DefaultBackoffBase,
		backoffMax:   DefaultBackoffMax,
		sleep:        retry.Sleep,
		now:          time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	c.backoffBase = max(c.backoffBase, time.Millisecond)
	c.backoffMax = max(c.backoffMax, c.backoffBase)
	return c
}

// call is one API request.
type call struct {
	method string
	path   string // relative to the base URL: "/tasks"
	query  url.Values
	body   []byte // JSON, for POST
	// notFound, if set, gives the message of a 404 ("no task with id X").
	notFound string
}

func (r call) String() string { return r.method + " " + r.path }

// do sends r, retrying 429s, 5xx answers and network errors within the
// retry budget, and decodes a 2xx body into out (if out is not nil).
func (c *Client) do(ctx context.Context, r call, out any) error {
	p := retry.Policy{MaxWait: c.maxRetryWait, Sleep: c.sleep, Backoff: retry.Backoff{Base: c.backoffBase, Max: c.backoffMax},
		OnRetry: func(attempt int, wait time.Duration, err error) {
			c.log.DebugContext(ctx, "todoist: retrying", slog.String("request", r.String()),
				slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", err.Error()))
		}}
	return p.Do(ctx, func(n int) (time.Duration, error) { return c.attempt(ctx, r, out, n) })
}

// attempt sends r once. On failure it returns how long to wait before the
// next attempt, or a negative wait if the error is final.
func (c *Client) attempt(ctx context.Context, r call, out any, n int) (time.Duration, error) {
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return -1, &agent.Error{Code: agent.ErrInvalid, Message: "cannot build the Todoist request " + r.String(), Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		// Refused or unresolvable is not slowness: retry.Policy gives it
		// only a few attempts, and the message names the setting.
		if e := retry.Unreached(err, "Todoist at "+req.URL.Host, "the network connection and TODOIST_API_URL", err); e != nil {
			return c.backoff(n), e
		}
		return c.backoff(n), &agent.Error{Code: agent.ErrServer, Message: "could not reach Todoist", Err: err}
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return c.decode(ctx, r, resp.Body, out, n)
	}

	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	ae := parseAPIError(resp.StatusCode, raw)
	// A stated wait (Retry-After, error_extra.retry_after: "Seconds to
	// wait before retrying", developer.todoist.com/api/v1
	// #tag/Sync/Overview) is honoured whatever the status.
	wait, asked := retryAfter(resp.Header, ae, c.now())
	switch {
	case resp.StatusCode == http.StatusGone:
		return -1, &agent.Error{Code: agent.ErrRetired,
			Message: fmt.Sprintf("retired Todoist endpoint %s (HTTP 410): this is a bug in tidybot", r), Err: ae}
	case resp.StatusCode == http.StatusTooManyRequests || ae.Tag == "LIMITS_REACHED":
		if !asked {
			wait = c.backoff(n)
		}
		msg := "Todoist's rate limit is reached; try again in a few minutes"
		if asked {
			msg = fmt.Sprintf("Todoist's rate limit is reached (it asks to wait %s); try again later", wait.Round(time.Second))
		}
		return wait, &agent.Error{Code: agent.ErrRateLimited, Message: msg, Err: ae}
	case resp.StatusCode >= 500:
		if !asked {
			wait = c.backoff(n)
		}
		return wait, &agent.Error{Code: agent.ErrServer,
			Message: fmt.Sprintf("Todoist is having trouble (HTTP %d); try again later", resp.StatusCode), Err: ae}
	case asked && resp.StatusCode != http.StatusUnauthorized:
		e := statusError(r, ae)
		e.Message += fmt.Sprintf(" (it asked to wait %s and retry)", wait.Round(time.Second))
		return wait, e
	}
	return -1, statusError(r, ae)
}

// decode reads a successful answer to r into out (or discards it when
// out is nil). An empty body is a success too; a body cut off mid-read is
// worth another try.
func (c *Client) decode(ctx context.Context, r call, body io.Reader, out any, n int) (time.Duration, error) {
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, maxBody))
		return 0, nil
	}
	if err := json.NewDecoder(io.LimitReader(body, maxBody)).Decode(out); err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if errors.Is(err, io.EOF) { // an empty 2xx body is a success too
			return 0, nil
		}
		return c.backoff(n), &agent.Error{Code: agent.ErrServer, Message: "Todoist sent an unreadable answer to " + r.String(), Err: err}
	}
	return 0, nil
}

// backoff returns the wait before retry n (0-based) when the server did
// not say.
func (c *Client) backoff(n int) time.Duration {
	return retry.Backoff{Base: c.backoffBase, Max: c.backoffMax}.Wait(n)
}

// retryAfter reads how long an answer asks to wait: the Retry-After
// header (retry.After), else error_extra.retry_after (seconds).
func retryAfter(h http.Header, ae *apiError, now time.Time) (time.Duration, bool) {
	if d, ok := retry.After(h, now); ok {
		return d, true
	}
	if ae != nil {
		if s := ae.retryAfter(); s > 0 {
			return time.Duration(s * float64(time.Second)), true
		}
	}
	return 0, false
}

// apiError is the JSON error body of API v1:
//
//	{"error":"Task not found","error_code":478,"error_tag":"NOT_FOUND","http_code":404,"error_extra":{…}}
//
// It is also the shape of a failed command in sync_status. It is kept as
// the cause of an *agent.Error, for logs.
type apiError struct {
	Message    string         `json:"error"`
	Code       int            `json:"error_code"`
	Tag        string         `json:"error_tag"`
	HTTPCode   int            `json:"http_code"`
	ErrorExtra map[string]any `json:"error_extra"`
}

func (e *apiError) Error() string {
	var b strings.Builder
	b.WriteString("todoist")
	if e.HTTPCode != 0 {
		fmt.Fprintf(&b, " HTTP %d", e.HTTPCode)
	}
	if e.Tag != "" {
		fmt.Fprintf(&b, " %s", e.Tag)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " (%d)", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// retryAfter returns error_extra.retry_after in seconds, or 0.
func (e *apiError) retryAfter() float64 {
	switch v := e.ErrorExtra["retry_after"].(type) {
	case float64:
		return v
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

// argument returns error_extra.argument, the argument a command error is
// about, if the server named one.
func (e *apiError) argument() string {
	s, _ := e.ErrorExtra["argument"].(string)
	return s
}

// parseAPIError decodes an error body. A body that is not JSON (a proxy's
// HTML page, a 410's plain text) becomes its first line.
func parseAPIError(status int, raw []byte) *apiError {
	var ae apiError
	if err := json.Unmarshal(raw, &ae); err != nil || (ae.Message == "" && ae.Tag == "") {
		line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		if len(line) > 200 {
			line = line[:200]
		}
		ae = apiError{Message: line}
	}
	if ae.HTTPCode == 0 {
		ae.HTTPCode = status
	}
	return &ae
}

// statusError maps a final (non-retryable) HTTP error to an *agent.Error.
func statusError(r call, ae *apiError) *agent.Error {
	switch ae.HTTPCode {
	case http.StatusUnauthorized:
		return &agent.Error{Code: agent.ErrUnauthorized, Message: "Todoist rejected the token: check TODOIST_TOKEN", Err: ae}
	case http.StatusForbidden:
		if ae.Tag == insufficientScope {
			return &agent.Error{Code: agent.ErrForbidden, Message: scopeMessage("read your Todoist", readScope), Err: ae}
		}
		if isPlanLimit(ae) {
			return &agent.Error{Code: agent.ErrPlanLimit, Message: planLimitMessage(ae), Err: ae}
		}
		return &agent.Error{Code: agent.ErrForbidden, Message: "Todoist refused access (" + orDefault(ae.Message, "forbidden") + "); the token may lack a permission", Err: ae}
	case http.StatusNotFound:
		msg := r.notFound
		if msg == "" {
			msg = "Todoist has no such object (" + r.String() + ")"
		}
		return &agent.Error{Code: agent.ErrNotFound, Message: msg, Err: ae}
	}
	if ae.Tag == "INVALID_SEARCH_QUERY" {
		return &agent.Error{Code: agent.ErrInvalid, Err: ae,
			Message: fmt.Sprintf("Todoist cannot read the filter query %q (%s); use filter syntax such as 'today | overdue', '#Project', '@label', 'p1', 'no date', 'search: text'",
				r.query.Get("query"), orDefault(ae.Message, "invalid query"))}
	}
	if ae.HTTPCode >= 400 && ae.HTTPCode < 500 {
		return &agent.Error{Code: agent.ErrInvalid, Err: ae,
			Message: fmt.Sprintf("Todoist rejected %s: %s", r, orDefault(ae.Message, http.StatusText(ae.HTTPCode)))}
	}
	return &agent.Error{Code: agent.ErrServer, Err: ae,
		Message: fmt.Sprintf("unexpected answer from Todoist to %s (HTTP %d)", r, ae.HTTPCode)}
}

// insufficientScope is the error_tag of Todoist's 403 for a token whose
// OAuth scopes do not cover the request or command ("Insufficient Token
// scope", as Doist/todoist-cli's tests quote it).
const insufficientScope = "AUTH_INSUFFICIENT_TOKEN_SCOPE"

// isPlanLimit reports a plan limit: a 403, or a tag such as
// MAX_PROJECTS_LIMIT_REACHED (a command error may carry only its tag).
func isPlanLimit(ae *apiError) bool {
	tag := strings.ToUpper(ae.Tag)
	return ae.HTTPCode == http.StatusForbidden && strings.Contains(tag, "LIMIT") ||
		strings.HasSuffix(tag, "_LIMIT_REACHED") && tag != "LIMITS_REACHED"
}

func planLimitMessage(ae *apiError) string {
	return "the Todoist plan's limit is reached (" + orDefault(ae.Message, ae.Tag) + "); delete or archive something first, or upgrade the plan"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func invalid(format string, args ...any) *agent.Error {
	return &agent.Error{Code: agent.ErrInvalid, Message: fmt.Sprintf(format, args...)}
}
