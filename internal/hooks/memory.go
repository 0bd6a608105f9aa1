// Package hooks keeps, in one process's memory, the links a platform
// gives with a person's request to answer it through (Slack's
// response_url, a Discord interaction's token): Store is the contract
// both adapters take as their Hooks (adapters/slack, adapters/discord);
// store/postgres implements it for replicas, Memory for a process with
// no shared store (bbolt, whose file one process holds).
package hooks

import (
	"context"
	"sync"
	"time"
)

// Store keeps the links where several serve replicas share them: the
// replica that receives a request is often not the one that answers it.
// Each link is a person's, never a channel's: kept under its channel and
// person, and bound to the first run that answers through it.
type Store interface {
	// SaveHook keeps url, the link of person's request in channel,
	// until expires, bound to no run and with no use counted.
	SaveHook(ctx context.Context, channel, person, url string, expires time.Time) error
	// TakeHook counts a use of a link of person in channel and returns
	// it, atomically across replicas: the one bound to run if it has a
	// use left, else person's newest one bound to none, which is then
	// bound to run (run "" binds none and takes only unbound ones). ok
	// is false when there is none unexpired at now with fewer than
	// within uses taken.
	TakeHook(ctx context.Context, channel, person, run string, within int, now time.Time) (url string, ok bool, err error)
}

var _ Store = (*Memory)(nil)

// Memory keeps hooks in memory. Its zero value is ready to use.
type Memory struct {
	// Now is the clock that decides which saved hooks are forgotten
	// (default time.Now).
	Now func() time.Time

	mu    sync.Mutex
	hooks map[place][]*hook // by channel and person, oldest first
}

// place is where a hook answers: a channel, to one person.
type place struct{ channel, person string }

// hook is one saved link, the run it is bound to and how much of it is
// used.
type hook struct {
	url     string
	run     string
	expires time.Time
	used    int
}

// SaveHook implements Store; the expired links of every channel are
// forgotten.
func (m *Memory) SaveHook(_ context.Context, channel, person, url string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hooks == nil {
		m.hooks = map[place][]*hook{}
	}
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	for p, hs := range m.hooks {
		kept := hs[:0]
		for _, h := range hs {
			if h.expires.After(now) {
				kept = append(kept, h)
			}
		}
		if len(kept) == 0 {
			delete(m.hooks, p)
		} else {
			m.hooks[p] = kept
		}
	}
	p := place{channel, person}
	m.hooks[p] = append(m.hooks[p], &hook{url: url, expires: expires})
	return nil
}

// TakeHook implements Store.
func (m *Memory) TakeHook(_ context.Context, channel, person, run string, within int, now time.Time) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pick *hook
	for _, h := range m.hooks[place{channel, person}] { // oldest first: the newest wins
		if !now.Before(h.expires) || h.used >= within || (h.run != "" && h.run != run) {
			continue
		}
		if pick == nil || pick.run == "" || h.run != "" {
			pick = h
		}
	}
	if pick == nil {
		return "", false, nil
	}
	pick.used++
	if run != "" {
		pick.run = run
	}
	return pick.url, true, nil
}
