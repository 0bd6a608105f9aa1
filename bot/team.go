package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Accounts gives each person their own Todoist (team mode): every run,
// its resume and its undo act through the account of the person who
// asked. cmd/tidybot implements it.
type Accounts interface {
	// Agent returns the agent acting on the person's own account; an
	// error wrapping ErrNotConnected when they have not connected one.
	Agent(ctx context.Context, platform, userID string) (Agent, error)
	// ConnectURL returns the address that connects the person's account,
	// bound to them and to the conversation they asked in.
	ConnectURL(ctx context.Context, in Incoming) (string, error)
	// Disconnect revokes the person's token at Todoist and forgets it; an
	// error wrapping ErrNotConnected when there is none.
	Disconnect(ctx context.Context, platform, userID string) error
	// Forget forgets a token Todoist refused (revoked or expired).
	Forget(ctx context.Context, platform, userID string) error
}

// ErrNotConnected says a person has not connected their Todoist.
var ErrNotConnected = errors.New("bot: no Todoist connected")

// errDailyCap stops a run whose person reached UserDailyTokens.
var errDailyCap = errors.New("daily token cap reached")

// allowedIn reports whether the sender of in may use the bot: an exact
// entry or, in team mode only (where each person uses their own
// Todoist), their Slack workspace or Discord server (slack:team:T…,
// discord:team:ID: the event's team, or in a direct message one of the
// teams the platform says the sender shares with the bot) or everyone
// on the platform (telegram:*).
func (b *Bot) allowedIn(in Incoming) bool {
	if b.Allowed(in.Platform, in.UserID) {
		return true
	}
	if b.cfg.Accounts == nil {
		return false
	}
	if b.allowed[in.Platform+":*"] || (in.TeamID != "" && b.allowed[in.Platform+":team:"+in.TeamID]) {
		return true
	}
	for _, t := range in.SharedTeams {
		if t != "" && b.allowed[in.Platform+":team:"+t] {
			return true
		}
	}
	return false
}

// agentFor is the agent a person's run uses: their own account in team
// mode, the one account otherwise.
func (b *Bot) agentFor(ctx context.Context, platform, userID string) (Agent, error) {
	if b.cfg.Accounts == nil {
		return b.agent, nil
	}
	return b.cfg.Accounts.Agent(ctx, platform, userID)
}

// PendingPrefix starts the key of the setting holding what a person
// asked before they connected (or when Todoist refused their token),
// an Incoming as JSON: it runs once they connect, so nothing they asked
// is lost. A Store's Prune deletes those made before its retention.
const PendingPrefix = "pending:"

func pendingKey(platform, userID string) string { return PendingPrefix + PersonID(platform, userID) }

// connectGate answers a person who has not connected their Todoist: it
// keeps what they asked for after they connect and sends one message
// with the Connect link. It reports whether in was handled.
func (b *Bot) connectGate(ctx context.Context, in Incoming) (bool, error) {
	if b.cfg.Accounts == nil {
		return false, nil
	}
	c := b.command(in.Command)
	if c != nil && !c.Todoist {
		return false, nil // /connect among them
	}
	_, err := b.cfg.Accounts.Agent(ctx, in.Platform, in.UserID)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, ErrNotConnected) {
		return true, fmt.Errorf("bot: read the Todoist connection of %s:%s: %w", in.Platform, in.UserID, err)
	}
	if dup, err := b.seen(ctx, in); err != nil || dup {
		return true, err
	}
	// A command on this conversation (/undo) means nothing once they
	// have connected; anything else runs then.
	if in.Button == "" && (in.Command != "" || strings.TrimSpace(in.Text) != "") && (c == nil || !c.Thread) {
		b.keepPending(ctx, in)
	}
	if b.promptedLately(ctx, in) && !in.AwaitsAnswer {
		b.log.Info("not connected; prompted within the hour, not again", slog.String("platform", in.Platform), slog.String("user_id", in.UserID))
		return true, nil
	}
	b.promptConnect(ctx, in, "")
	return true, nil
}

// promptEvery is how often a person who has not connected is prompted
// to, however many messages they send meanwhile (/connect always
// answers, and so does an event the platform shows as pending until
// answered: Incoming.AwaitsAnswer).
const promptEvery = time.Hour

// promptedKey is the setting holding when a person was last prompted to
// connect; connecting or disconnecting clears it.
func promptedKey(platform, userID string) string {
	return "connect-prompted:" + PersonID(platform, userID)
}

// promptedLately reports whether in's person was prompted to connect
// within promptEvery, and if not, records that they are being prompted
// now.
func (b *Bot) promptedLately(ctx context.Context, in Incoming) bool {
	key := promptedKey(in.Platform, in.UserID)
	now := b.cfg.Now()
	if v, err := b.store.Setting(ctx, key); err == nil && v != "" {
		if at, err := time.Parse(time.RFC3339, v); err == nil && now.Sub(at) < promptEvery && !at.After(now) {
			return true
		}
	}
	if err := b.store.SetSetting(ctx, key, now.UTC().Format(time.RFC3339)); err != nil {
		b.log.Error("remember a Connect prompt", slog.Any("err", err))
	}
	return false
}

// keepPending remembers in to run once its person connects.
func (b *Bot) keepPending(ctx context.Context, in Incoming) {
	in.EventID, in.Button, in.ButtonRef, in.AwaitsAnswer = "", "", "", false
	// Cut as any message is (the gate comes before prepare): the
	// person is told when it runs.
	if in.Clipped == 0 {
		in, in.Clipped = clipMessage(in)
	}
	raw, err := json.Marshal(in)
	if err == nil {
		err = b.store.SetSetting(ctx, pendingKey(in.Platform, in.UserID), string(raw))
	}
	if err != nil {
		b.log.Error("keep the request of a person not connected", slog.Any("err", err))
	}
}

// promptConnect sends the Connect Todoist message. In a shared chat the
// link is not posted (anyone could open it and tie their account to the
// asker): the person is asked to connect in a direct message.
func (b *Bot) promptConnect(ctx context.Context, in Incoming, why string) {
	if why == "" {
		why = "To work on your tasks I need your own Todoist."
	}
	if !in.DM {
		b.replyLater(ctx, in.Platform, reply(in, why+" Send me /connect in a direct message to connect your account (a link posted here could be opened by anyone); what you asked here runs once you have."))
		return
	}
	u, err := b.cfg.Accounts.ConnectURL(ctx, in)
	if err != nil {
		b.log.Error("connect link", slog.Any("err", err))
		b.replyLater(ctx, in.Platform, reply(in, "I could not make a Connect link; the details are in the log."))
		return
	}
	m := reply(in, why+" Connect Todoist: "+u+"\n(The link works for you only, for a few minutes.)")
	m.Link = &Link{Label: "Connect Todoist", URL: u, UserID: in.UserID} // a URL button
	b.replyLater(ctx, in.Platform, m)
}

// Connected is called once a person's Todoist is connected, with the
// conversation the link was made for and the Todoist account's name and
// email ("" if unknown): it says which account it is there, so a link
// opened by someone else is seen at once, and runs what they asked
// before connecting.
func (b *Bot) Connected(ctx context.Context, in Incoming, account string) error {
	text := "✅ Your Todoist is connected. /disconnect removes the connection."
	if account != "" {
		text = "✅ Connected the Todoist account of " + account + ". Not yours? Send /disconnect now."
	}
	// Queued, not awaited: the person's browser waits for the page.
	b.replyLater(ctx, in.Platform, reply(in, text))
	if err := b.store.SetSetting(ctx, promptedKey(in.Platform, in.UserID), ""); err != nil {
		b.log.Error("clear the Connect prompt's time", slog.Any("err", err))
	}
	key := pendingKey(in.Platform, in.UserID)
	raw, err := b.store.Setting(ctx, key)
	if errors.Is(err, ErrNotFound) || raw == "" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: read pending request: %w", err)
	}
	if err := b.store.SetSetting(ctx, key, ""); err != nil {
		return fmt.Errorf("bot: clear pending request: %w", err)
	}
	var p Incoming
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return fmt.Errorf("bot: read pending request: %w", err)
	}
	p.At = b.cfg.Now()
	return b.enqueue(ctx, p)
}

// disconnect revokes and forgets the person's token.
func (b *Bot) disconnect(ctx context.Context, in Incoming) error {
	err := b.cfg.Accounts.Disconnect(ctx, in.Platform, in.UserID)
	switch {
	case errors.Is(err, ErrNotConnected):
		b.send(ctx, in.Platform, reply(in, "No Todoist is connected for you."))
		return nil
	case err != nil:
		return fmt.Errorf("bot: disconnect %s:%s: %w", in.Platform, in.UserID, err)
	}
	if err := b.store.SetSetting(ctx, promptedKey(in.Platform, in.UserID), ""); err != nil {
		b.log.Error("clear the Connect prompt's time", slog.Any("err", err))
	}
	b.send(ctx, in.Platform, reply(in, "Disconnected: I revoked my access to your Todoist and deleted the token. /connect connects it again."))
	return nil
}

// rejected handles a run that ended because Todoist refused its
// person's token: the token is forgotten, the request kept for when they
// connect again, and they are asked to reconnect.
func (b *Bot) rejected(ctx context.Context, r *Run) {
	if err := b.cfg.Accounts.Forget(ctx, r.Platform, r.UserID); err != nil {
		b.log.Error("forget a refused token", slog.String("run_id", r.ID), slog.Any("err", err))
	}
	in := Incoming{Platform: r.Platform, ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID, Text: r.Instruction, DM: b.isDM(ctx, r)}
	b.keepPending(ctx, in)
	_ = b.promptedLately(ctx, in) // prompted now: their next messages are not
	b.promptConnect(ctx, in, "Please connect your Todoist again.")
}

// isDM reports whether r's conversation is a direct one: the job that
// started it said so.
func (b *Bot) isDM(_ context.Context, r *Run) bool {
	return r.DM
}

// usageKey is the setting counting a person's model tokens on a day.
func usageKey(platform, userID string, day time.Time) string {
	return "usage:" + PersonID(platform, userID) + ":" + day.UTC().Format(time.DateOnly)
}

// personUsage returns a person's tokens on day.
func (b *Bot) personUsage(ctx context.Context, platform, userID string, day time.Time) int {
	return b.usageOf(ctx, usageKey(platform, userID, day))
}

// usageOf returns the tokens the store counts under key (0 when it cannot
// tell: the daily cap then errs on the side of serving).
func (b *Bot) usageOf(ctx context.Context, key string) int {
	v, err := b.store.Setting(ctx, key)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// overCap reports whether a person has used their daily tokens: those
// counted in the store and those of their calls that ended since (see
// cap.go).
func (b *Bot) overCap(ctx context.Context, platform, userID string) bool {
	if b.cfg.UserDailyTokens <= 0 {
		return false
	}
	return b.ledger.spent(ctx, b, usageKey(platform, userID, b.cfg.Now())) >= b.cfg.UserDailyTokens
}

// capMessage is what a person hears at their daily cap.
func (b *Bot) capMessage() string {
	return fmt.Sprintf("You have used your %d model tokens for today, so I stopped. The allowance starts again at midnight UTC; /usage shows your day and month.", b.cfg.UserDailyTokens)
}

// personUsageText is a person's own day and month, for /usage.
func (b *Bot) personUsageText(ctx context.Context, in Incoming) string {
	now := b.cfg.Now().UTC()
	day := b.personUsage(ctx, in.Platform, in.UserID, now)
	month := 0
	for d := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC); !d.After(now); d = d.AddDate(0, 0, 1) {
		month += b.personUsage(ctx, in.Platform, in.UserID, d)
	}
	text := fmt.Sprintf("You used %s today and %s in %s.", plural(day, "token"), plural(month, "token"), now.Format("January"))
	if b.cfg.UserDailyTokens > 0 {
		text += fmt.Sprintf(" Your daily allowance is %d tokens.", b.cfg.UserDailyTokens)
	}
	return text
}

// rejectedToken reports whether a run ended because Todoist refused the
// token.
func rejectedToken(out agent.Outcome) bool {
	return agent.ErrorCodeOf(out.Err) == agent.ErrUnauthorized
}
