// Package accounts is team mode: each person connects their own Todoist
// through OAuth (our Connect page, then Todoist's, then the callback),
// and their token is kept sealed (AES-256-GCM) in the store under keys
// derived from TIDYBOT_SECRET_KEY, which also sign the OAuth state. A
// rotation (new,old) opens what the old key sealed and seals it again
// with the new one; /disconnect revokes the token at Todoist.
package accounts

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
)

// StateTTL is how long a Connect link works.
const StateTTL = 10 * time.Minute

// CallbackPath is where Todoist sends people back (the app's OAuth
// redirect URL is TIDYBOT_PUBLIC_URL + CallbackPath).
const CallbackPath = "/oauth/todoist/callback"

// ConnectPath is our own page a Connect link opens: it names the chat
// account that will get access, and binds the flow to the browser
// (browserCookie) before sending it on to Todoist.
const ConnectPath = "/oauth/todoist/connect"

// browserCookie binds a Connect flow to the browser that opened our
// page: the callback refuses a browser without it, so a Todoist
// authorize address copied out of the flow and sent to someone else
// connects nothing.
const browserCookie = "tidybot_connect"

// Store is what team mode keeps in the store: sealed tokens as
// settings, used OAuth states as events.
type Store interface {
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
	MarkEvent(ctx context.Context, key string, at time.Time) (bool, error)
}

// Team is team mode's accounts: each person's Todoist token, connected
// through OAuth, kept encrypted in the store, and the agent acting on it.
type Team struct {
	st     Store
	oauth  *todoist.OAuth
	newAg  func(token string) bot.Agent
	redact *agent.Redactor
	log    *slog.Logger
	now    func() time.Time
	// aeads and signKeys come from each TIDYBOT_SECRET_KEY key: the
	// first seals and signs, every one opens and verifies (rotation).
	aeads    []cipher.AEAD
	signKeys [][]byte
	// connected hears a new connection (the bot's Connected) with the
	// Todoist account's name and email ("" if unknown).
	connected func(ctx context.Context, in bot.Incoming, account string) error
	// whoami names the Todoist account a token opens ("Name (email)").
	whoami func(ctx context.Context, token string) (string, error)
	// public is TIDYBOT_PUBLIC_URL: Connect links point at our page there.
	public string
	// snaps, when set, holds the accounts' kept Todoist snapshots,
	// deleted with the token.
	snaps SnapshotDeleter

	// itemAdded hears Todoist's item:added webhooks (webhook.go).
	itemAdded ItemAdded

	mu     sync.Mutex // protects agents
	agents map[string]cachedAgent
}

type cachedAgent struct {
	token string
	ag    bot.Agent
}

var _ bot.Accounts = (*Team)(nil)

// Config is what team mode is made of.
type Config struct {
	// Secrets are TIDYBOT_SECRET_KEY's keys, the current one first.
	Secrets [][]byte
	Store   Store
	OAuth   *todoist.OAuth
	// NewAgent makes the agent that acts on one person's token.
	NewAgent func(token string) bot.Agent
	// WhoAmI names the Todoist account a token opens ("Name (email)");
	// nil: the chat is not told which account connected.
	WhoAmI func(ctx context.Context, token string) (string, error)
	// PublicURL is TIDYBOT_PUBLIC_URL: Connect links point at our page there.
	PublicURL string
	// Redact learns each token loaded or connected.
	Redact *agent.Redactor
	Logger *slog.Logger
	// Now is the clock (nil: time.Now; tests: an expired state).
	Now func() time.Time
	// Snapshots, when set, holds the accounts' kept Todoist snapshots,
	// deleted with the token.
	Snapshots SnapshotDeleter
}

// New derives two keys from each of cfg.Secrets (the first is the
// current one): one encrypts tokens (AES-256-GCM), one signs OAuth state
// (HMAC-SHA256).
func New(cfg Config) (*Team, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	t := &Team{st: cfg.Store, oauth: cfg.OAuth, newAg: cfg.NewAgent, redact: cfg.Redact, log: log, now: now,
		whoami: cfg.WhoAmI, public: cfg.PublicURL, snaps: cfg.Snapshots, agents: map[string]cachedAgent{}}
	for _, secret := range cfg.Secrets {
		block, err := aes.NewCipher(derive(secret, "tidybot token encryption v1"))
		if err != nil {
			return nil, fmt.Errorf("team mode: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("team mode: %w", err)
		}
		t.aeads = append(t.aeads, aead)
		t.signKeys = append(t.signKeys, derive(secret, "tidybot oauth state v1"))
	}
	if len(t.aeads) == 0 {
		return nil, errors.New("team mode: TIDYBOT_SECRET_KEY is not set")
	}
	return t, nil
}

// OnConnected sets what hears a new connection (the bot's Connected,
// made after the bot, which needs t): the chat account, and the Todoist
// account's name and email ("" if unknown).
func (t *Team) OnConnected(f func(ctx context.Context, in bot.Incoming, account string) error) {
	t.connected = f
}

// Routes adds the Connect page and Todoist's callback to mux.
func (t *Team) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+CallbackPath, t.callback)
	if t.oauth != nil && t.oauth.ClientSecret != "" {
		mux.Handle("POST "+WebhookPath, NewWebhook(t.oauth.ClientSecret, func(ctx context.Context, user, task string) error {
			if t.itemAdded == nil {
				return nil
			}
			return t.itemAdded(ctx, user, task)
		}, t.log))
	}
	mux.HandleFunc("GET "+ConnectPath, t.connectPage)
}

func derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func tokenKey(platform, userID string) string {
	return "todoist_token:" + bot.PersonID(platform, userID)
}

// seal encrypts a token for one person: the person is the additional
// data, so a record copied to another person does not open.
func (t *Team) seal(platform, userID, token string) string {
	a := t.aeads[0]
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	ct := a.Seal(nonce, nonce, []byte(token), []byte(bot.PersonID(platform, userID)))
	return "v1:" + base64.RawStdEncoding.EncodeToString(ct)
}

// errUnreadable is a stored token that no key opens.
var errUnreadable = errors.New("team mode: a stored token does not open with TIDYBOT_SECRET_KEY (was the key changed without keeping the old one? see docs/team-mode.md, \"Key rotation\")")

// open decrypts a stored token; current reports whether the current key
// sealed it.
func (t *Team) open(platform, userID, rec string) (tok string, current bool, err error) {
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(rec, "v1:"))
	if err != nil || !strings.HasPrefix(rec, "v1:") {
		return "", false, errUnreadable
	}
	for i, a := range t.aeads {
		if len(raw) < a.NonceSize() {
			break
		}
		if pt, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(bot.PersonID(platform, userID))); err == nil {
			return string(pt), i == 0, nil
		}
	}
	return "", false, errUnreadable
}

// token returns the person's token, or bot.ErrNotConnected.
func (t *Team) token(ctx context.Context, platform, userID string) (string, error) {
	rec, err := t.st.Setting(ctx, tokenKey(platform, userID))
	if errors.Is(err, bot.ErrNotFound) || (err == nil && rec == "") {
		return "", bot.ErrNotConnected
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok, current, err := t.open(platform, userID, rec)
	if err != nil {
		// The person is asked to connect again; the unreadable record
		// is replaced then.
		t.log.Warn("a stored Todoist token does not open: the person must connect again", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
		return "", bot.ErrNotConnected
	}
	t.redact.Add(tok)
	if !current {
		// Sealed with an old key (a rotation): seal it with the new one.
		if err := t.st.SetSetting(ctx, tokenKey(platform, userID), t.seal(platform, userID, tok)); err != nil {
			return "", fmt.Errorf("re-encrypt token: %w", err)
		}
	}
	return tok, nil
}

// Agent implements bot.Accounts.
func (t *Team) Agent(ctx context.Context, platform, userID string) (bot.Agent, error) {
	tok, err := t.token(ctx, platform, userID)
	if err != nil {
		return nil, err
	}
	k := bot.PersonID(platform, userID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.agents[k]; ok && c.token == tok {
		return c.ag, nil
	}
	ag := t.newAg(tok)
	t.agents[k] = cachedAgent{token: tok, ag: ag}
	return ag, nil
}

// forget deletes the person's token here.
func (t *Team) forget(ctx context.Context, platform, userID string) error {
	t.mu.Lock()
	delete(t.agents, bot.PersonID(platform, userID))
	t.mu.Unlock()
	if err := t.st.SetSetting(ctx, tokenKey(platform, userID), ""); err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	return nil
}

// SnapshotDeleter deletes an account's kept Todoist snapshot (every
// task's content, kept for incremental reads).
type SnapshotDeleter interface {
	DeleteSnapshot(ctx context.Context, key string) error
}

// dropSnapshot deletes the snapshot of the account tok reads.
func (t *Team) dropSnapshot(ctx context.Context, tok string) error {
	if t.snaps == nil {
		return nil
	}
	if err := t.snaps.DeleteSnapshot(ctx, todoist.AccountKey(tok)); err != nil {
		return fmt.Errorf("delete the kept Todoist snapshot: %w", err)
	}
	return nil
}

// Forget implements bot.Accounts; the account's snapshot goes too.
func (t *Team) Forget(ctx context.Context, platform, userID string) error {
	if tok, err := t.token(ctx, platform, userID); err == nil {
		if err := t.dropSnapshot(ctx, tok); err != nil {
			return err
		}
	}
	return t.forget(ctx, platform, userID)
}

// Disconnect implements bot.Accounts: the token is revoked at Todoist,
// then deleted here with the account's kept snapshot.
func (t *Team) Disconnect(ctx context.Context, platform, userID string) error {
	tok, err := t.token(ctx, platform, userID)
	if err != nil {
		return err
	}
	if err := t.oauth.Revoke(ctx, tok); err != nil {
		return err
	}
	if err := t.dropSnapshot(ctx, tok); err != nil {
		return err
	}
	return t.forget(ctx, platform, userID)
}

// state is what a Connect link's OAuth state carries: who asked, where,
// until when, and a nonce that makes it single-use.
type state struct {
	Platform string `json:"p"`
	UserID   string `json:"u"`
	UserName string `json:"un,omitempty"`
	ChatID   string `json:"c"`
	ThreadID string `json:"t,omitempty"`
	DM       bool   `json:"d,omitempty"`
	Expires  int64  `json:"e"`
	Nonce    string `json:"n"`
}

// ConnectURL implements bot.Accounts: our Connect page (ConnectPath)
// with a state signed with TIDYBOT_SECRET_KEY, bound to the person,
// expiring in StateTTL. The page names the person before it sends the
// browser to Todoist's authorize page with the same state.
func (t *Team) ConnectURL(_ context.Context, in bot.Incoming) (string, error) {
	n := make([]byte, 16)
	_, _ = rand.Read(n)
	s := state{Platform: in.Platform, UserID: in.UserID, UserName: in.UserName, ChatID: in.ChatID, ThreadID: in.ThreadID, DM: in.DM,
		Expires: t.now().Add(StateTTL).Unix(), Nonce: hex.EncodeToString(n)}
	raw, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("connect link: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(raw)
	return strings.TrimRight(t.public, "/") + ConnectPath + "?" + url.Values{"state": {p + "." + t.sign(p)}}.Encode(), nil
}

// platformNames are the chat platforms' names as people know them, for
// the Connect pages (a platform not listed shows its id).
var platformNames = map[string]string{"slack": "Slack", "telegram": "Telegram", "discord": "Discord"}

// chatAccount names the chat account a state links, for the person in
// the browser: "Telegram user @ann (43)".
func chatAccount(s state) string {
	platform := platformNames[s.Platform]
	if platform == "" {
		platform = s.Platform
	}
	if s.UserName != "" {
		return fmt.Sprintf("%s user @%s (%s)", platform, s.UserName, s.UserID)
	}
	return fmt.Sprintf("%s user %s", platform, s.UserID)
}

// browserMark is the value of browserCookie for a state's nonce.
func (t *Team) browserMark(nonce string) string { return t.sign("browser:" + nonce) }

// connectPage serves GET ConnectPath: for a valid, unexpired state it
// shows whose chat account will get access to the Todoist account signed
// in in this browser, sets browserCookie, and offers a Continue button to
// Todoist's authorize page. A bad state gets a 400 page and no cookie.
func (t *Team) connectPage(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("state")
	s, err := t.readState(raw)
	if err != nil {
		t.log.Warn("connect page refused: bad state")
		page(w, http.StatusBadRequest, "Todoist was not connected", errState.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: browserCookie, Value: t.browserMark(s.Nonce), Path: "/oauth/todoist/",
		MaxAge: int(StateTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(t.public, "https://")})
	who := chatAccount(s)
	next := t.oauth.AuthorizeURL(todoist.Scopes, raw)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	// Not in a frame: the words must be seen, not clicked through blind.
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `<!doctype html><meta charset=utf-8><meta name=viewport content="width=device-width"><title>Connect Todoist</title>
<h1>Connect Todoist</h1>
<p><strong>%s</strong> will be able to read and change your Todoist through this bot.</p>
<p>Continue only if that is you. If someone sent you this link, close this page.</p>
<p><a href="%s" style="display:inline-block;padding:.6em 1.2em;background:#db4c3f;color:#fff;border-radius:6px;text-decoration:none">Continue to Todoist</a></p>
`, html.EscapeString(who), html.EscapeString(next))
}

func (t *Team) sign(payload string) string { return signWith(t.signKeys[0], payload) }

func signWith(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signed reports whether sig is payload's signature under any key.
func (t *Team) signed(payload, sig string) bool {
	for _, k := range t.signKeys {
		if hmac.Equal([]byte(sig), []byte(signWith(k, payload))) {
			return true
		}
	}
	return false
}

// errState is a state that is forged, expired or used.
var errState = errors.New("this Connect link is not valid: it was changed, has expired or was used already; ask the bot for a new one with /connect")

// readState verifies a state's signature and expiry.
func (t *Team) readState(raw string) (state, error) {
	var s state
	p, sig, ok := strings.Cut(raw, ".")
	if !ok || !t.signed(p, sig) {
		return s, errState
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || json.Unmarshal(b, &s) != nil || s.Nonce == "" || s.UserID == "" {
		return s, errState
	}
	if t.now().Unix() > s.Expires {
		return s, errState
	}
	return s, nil
}

// checkState verifies the signature and the expiry, then uses the nonce
// up (the store remembers it), so a state works once.
func (t *Team) checkState(ctx context.Context, raw string) (state, error) {
	s, err := t.readState(raw)
	if err != nil {
		return s, err
	}
	return t.useState(ctx, s)
}

// useState uses a read state's nonce up.
func (t *Team) useState(ctx context.Context, s state) (state, error) {
	fresh, err := t.st.MarkEvent(ctx, "oauth-state:"+s.Nonce, t.now())
	if err != nil {
		return s, fmt.Errorf("use state: %w", err)
	}
	if !fresh {
		return s, errState
	}
	return s, nil
}

// callback serves GET /oauth/todoist/callback: it checks the state,
// exchanges the code, stores the token encrypted and tells the person's
// chat. A refused request stores nothing and gets a 400 page.
func (t *Team) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// Only our own words: the query is anyone's to write, and a page
		// on our domain must not say what an attacker chose.
		t.log.Warn("oauth callback: Todoist answered an error", slog.String("error", oauthErrorCode(e)))
		page(w, http.StatusBadRequest, "Todoist was not connected", oauthErrorText(e)+" Ask the bot for a new link with /connect.")
		return
	}
	s, err := t.readState(q.Get("state"))
	if err == nil {
		// The browser that opened our page, and no other: without it a
		// Todoist address copied from the flow would link whoever opens
		// it to the person who asked.
		c, cerr := r.Cookie(browserCookie)
		if cerr != nil || !t.signed("browser:"+s.Nonce, c.Value) {
			t.log.Warn("oauth callback refused: another browser than the one that opened the Connect page",
				slog.String("platform", s.Platform), slog.String("user_id", s.UserID))
			page(w, http.StatusBadRequest, "Todoist was not connected",
				"This browser did not open the Connect link. Open the link the bot sent you (send /connect for a new one) in this browser.")
			return
		}
		s, err = t.useState(r.Context(), s)
	}
	if err != nil {
		if !errors.Is(err, errState) {
			t.log.Error("oauth callback", slog.Any("err", err))
		} else {
			t.log.Warn("oauth callback refused: bad state")
		}
		page(w, http.StatusBadRequest, "Todoist was not connected", errState.Error())
		return
	}
	tok, err := t.oauth.Exchange(r.Context(), q.Get("code"))
	if err != nil {
		t.log.Warn("oauth code exchange failed", slog.String("platform", s.Platform), slog.String("user_id", s.UserID), slog.Any("err", t.redact.Error(err)))
		page(w, http.StatusBadRequest, "Todoist was not connected", "Todoist did not accept the authorization. Ask the bot for a new link with /connect.")
		return
	}
	t.redact.Add(tok)
	if err := t.st.SetSetting(r.Context(), tokenKey(s.Platform, s.UserID), t.seal(s.Platform, s.UserID, tok)); err != nil {
		t.log.Error("store token", slog.Any("err", err))
		page(w, http.StatusInternalServerError, "Todoist was not connected", "Something went wrong on our side; try /connect again.")
		return
	}
	t.mu.Lock()
	delete(t.agents, bot.PersonID(s.Platform, s.UserID))
	t.mu.Unlock()
	t.log.Info("todoist connected", slog.String("platform", s.Platform), slog.String("user_id", s.UserID))
	http.SetCookie(w, &http.Cookie{Name: browserCookie, Value: "", Path: "/oauth/todoist/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(t.public, "https://")})
	if t.connected != nil {
		// Which Todoist account it is goes to the chat, so a mistake
		// (a forwarded link) is seen at once.
		account := ""
		if t.whoami != nil {
			a, err := t.whoami(r.Context(), tok)
			if err != nil {
				t.log.Warn("read the connected Todoist account's name", slog.Any("err", t.redact.Error(err)))
			}
			account = a
		}
		in := bot.Incoming{Platform: s.Platform, ChatID: s.ChatID, ThreadID: s.ThreadID, UserID: s.UserID, DM: s.DM}
		if err := t.connected(context.WithoutCancel(r.Context()), in, account); err != nil {
			t.log.Error("after connecting", slog.Any("err", err))
		}
	}
	back := platformNames[s.Platform]
	if back == "" {
		back = "the chat"
	}
	page(w, http.StatusOK, "Connected", "Connected — back to "+back+". You can close this page.")
}

// oauthErrors is what the callback page says for each error code an
// authorization server sends back to the redirect URL: Todoist's
// access_denied and invalid_scope (developer.todoist.com/guides/#authorization;
// the fake follows it) and the others RFC 6749 section 4.1.2.1 defines.
var oauthErrors = map[string]string{
	"access_denied":             "Access was not granted on Todoist's page.",
	"invalid_scope":             "Todoist did not accept the permissions this bot asks for; tell the bot's owner.",
	"invalid_request":           "Todoist found the request malformed; tell the bot's owner.",
	"unauthorized_client":       "Todoist does not let this app connect; tell the bot's owner.",
	"unsupported_response_type": "Todoist did not accept the request; tell the bot's owner.",
	"server_error":              "Todoist had an error.",
	"temporarily_unavailable":   "Todoist is busy right now; try again in a few minutes.",
}

// oauthErrorText is our own sentence for an error code; any other code
// gets one fixed sentence, never its text.
func oauthErrorText(code string) string {
	if s, ok := oauthErrors[code]; ok {
		return s
	}
	return "Todoist did not connect your account."
}

// oauthErrorCode is code if it is one we know, else "other": the log
// does not carry an attacker's text either.
func oauthErrorCode(code string) string {
	if _, ok := oauthErrors[code]; ok {
		return code
	}
	return "other"
}

// page writes a small HTML page.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width\"><title>%s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}
