package slack

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/tidybot/tidybot/bot"
)

// The assistant pane (the manifest's assistant_view; Slack's "Agents &
// AI Apps"): a person opens tidybot beside any channel. Slack starts a
// thread in their DM with the app and sends assistant_thread_started
// (docs.slack.dev/reference/events/assistant_thread_started); the adapter
// sets its suggested prompts. Their messages there are ordinary DM
// messages in that thread (message.im with thread_ts), so they reach the
// bot as today, one conversation per pane thread; the first one titles
// the thread (assistant.threads.setTitle), and the run's progress is the
// thread's status line (assistant.threads.setStatus, bot.ThreadStatus)
// instead of a status message.

// Prompts are the suggested prompts of a new pane thread: each sends its
// title as the person's message.
var Prompts = []string{"Tidy my inbox", "What's due today?", "Plan my week"}

// paneCallTimeout bounds one call about the pane made outside the send
// queue (prompts, title): the event was acknowledged already.
const paneCallTimeout = 10 * time.Second

// titleLen is the most characters of a thread's title taken from the
// person's first message.
const titleLen = 60

// panes are the assistant threads the adapter knows of: started while
// it ran (assistant_thread_started), by channel and thread ts.
type panes struct {
	mu sync.Mutex
	m  map[string]*pane
}

type pane struct {
	titled bool
	// refused is set once Slack refused the thread a status line: it is
	// no pane thread (an app without assistant_view, a plain DM thread).
	refused bool
	// viewing is the channel the person has open beside the pane (the
	// event's context); kept for the logs, not given to the model.
	viewing string
}

func paneKey(channel, threadTS string) string { return channel + " " + threadTS }

// get returns the pane of a thread, making it when make is set.
func (p *panes) get(channel, threadTS string, make bool) *pane {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := paneKey(channel, threadTS)
	if p.m[k] == nil && make {
		if p.m == nil || len(p.m) >= maxPanes {
			// Starting over forgets little: an old thread is titled
			// already (Slack keeps the title) and a refused status line
			// is tried once more.
			p.m = map[string]*pane{}
		}
		p.m[k] = &pane{}
	}
	return p.m[k]
}

// maxPanes bounds the threads the adapter remembers (about 1 MB): one
// is added for every pane opened and every thread refused a status line.
const maxPanes = 10000

var _ bot.ThreadStatus = (*Adapter)(nil)

// assistantEvent handles the pane's own events; ok is false for any
// other event. A new thread gets its suggested prompts, in the
// background: the event is acknowledged at once.
func (a *Adapter) assistantEvent(inner any) (ok bool) {
	var th slackevents.AssistantThread
	started := false
	switch e := inner.(type) {
	case *slackevents.AssistantThreadStartedEvent:
		th, started = e.AssistantThread, true
	case *slackevents.AssistantThreadContextChangedEvent:
		th = e.AssistantThread
	default:
		return false
	}
	if th.ChannelID == "" || th.ThreadTimeStamp == "" {
		return true
	}
	p := a.panes.get(th.ChannelID, th.ThreadTimeStamp, true)
	a.panes.mu.Lock()
	p.viewing = th.Context.ChannelID
	a.panes.mu.Unlock()
	a.log.Debug("slack assistant thread", slog.Bool("started", started), slog.String("channel", th.ChannelID),
		slog.String("thread_ts", th.ThreadTimeStamp), slog.String("viewing", th.Context.ChannelID))
	if !started {
		return true
	}
	params := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: "Try"}
	for _, s := range Prompts {
		params.AddPrompt(s, s)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), paneCallTimeout)
		defer cancel()
		if err := a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params); err != nil {
			a.log.Warn("slack: suggested prompts not set", slog.Any("err", a.redact(err)))
		}
	}()
	return true
}

// titlePane titles a pane thread after the person's first message
// there, once, in the background.
func (a *Adapter) titlePane(channel, threadTS, text string) {
	p := a.panes.get(channel, threadTS, false)
	if p == nil {
		return
	}
	a.panes.mu.Lock()
	done := p.titled
	p.titled = true
	a.panes.mu.Unlock()
	title := clip(strings.Join(strings.Fields(text), " "), titleLen)
	if done || title == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), paneCallTimeout)
		defer cancel()
		err := a.api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: channel, ThreadTS: threadTS, Title: title})
		if err != nil {
			a.log.Warn("slack: thread title not set", slog.Any("err", a.redact(err)))
		}
	}()
}

// HasStatus implements bot.ThreadStatus: a thread of a DM (D…) — a
// pane thread the adapter saw start or, after a restart, any DM thread
// (with assistant_view on, the app's DM threads are pane threads) — or
// of a channel (setStatus works there since 2026-03-05, scope
// chat:write: docs.slack.dev/changelog/2026/03/05/set-status-scope-update),
// unless Slack refused it a status line before. Where Slack refuses the
// line, the bot posts a status message instead.
func (a *Adapter) HasStatus(chatID, threadID string) bool {
	if threadID == "" {
		return false
	}
	if p := a.panes.get(chatID, threadID, false); p != nil {
		a.panes.mu.Lock()
		defer a.panes.mu.Unlock()
		return !p.refused
	}
	return true
}

// statusLapse is how long Slack shows a thread's status without a
// message: "A two minute timeout applies, which will cause the status
// to be removed if no message has been sent"
// (docs.slack.dev/reference/methods/assistant.threads.setStatus).
const statusLapse = 2 * time.Minute

var _ bot.Lapsing = (*Adapter)(nil)

// Lapse implements bot.Lapsing for the status line (SetStatus): the bot
// sets it again before Slack removes it while a step runs long.
func (a *Adapter) Lapse() time.Duration { return statusLapse }

// SetStatus implements bot.ThreadStatus with
// assistant.threads.setStatus; "" clears the line. It goes through the
// bot's send queue, which waits out a 429. A thread Slack refuses
// (invalid_thread_ts, channel_not_found) is remembered: HasStatus says
// no from then on.
func (a *Adapter) SetStatus(ctx context.Context, chatID, threadID, text string) error {
	err := a.noRetry.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: chatID, ThreadTS: threadID, Status: text})
	if err == nil {
		return nil
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if code, _, _ := strings.Cut(se.Err, " "); code == "invalid_thread_ts" || code == "channel_not_found" {
			p := a.panes.get(chatID, threadID, true)
			a.panes.mu.Lock()
			p.refused = true
			a.panes.mu.Unlock()
		}
	}
	return a.queueError(err)
}
