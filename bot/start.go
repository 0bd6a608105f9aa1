package bot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StartQuery names what the handling of a message's job reads as it
// begins (see ReadStart).
type StartQuery struct {
	// Key is the conversation (Incoming.ThreadKey).
	Key string
	// JobID is the job's id, which is also the id of the run it begins.
	JobID string
	// Setting is the key of the setting read (the person's settings).
	Setting string
	// Messages is how many of the conversation's latest messages are
	// read.
	Messages int
	// Usage is the key of a second setting read, the person's token
	// count of the day (for the daily cap), "" for none.
	Usage string
}

// StartReads is what ReadStart returns.
type StartReads struct {
	// Waiting is the conversation's run waiting for the user, as
	// WaitingRun returns it (nil for none).
	Waiting *Run
	// Stored reports whether the run of the job's id is stored (Run
	// finds it): it began before a restart.
	Stored bool
	// Thread is the conversation, nil when it is not stored.
	Thread *Thread
	// Messages are, when Thread is stored, RecentMessages of the
	// conversation since Thread.ResetAt; nil otherwise.
	Messages []Message
	// Setting is the setting's value, "" when it is not stored.
	Setting string
	// Usage is the Usage setting's value, "" when it is not stored (or
	// not asked for).
	Usage string
	// CancelMark is, with a Shared store, its CancelMark for the run
	// the job begins; 0 otherwise.
	CancelMark int64
}

// StartReader is a Store that makes the reads of ReadStart in one round
// trip (PostgreSQL); with another store (bbolt, whose reads are local)
// the bot makes them one by one.
type StartReader interface {
	// ReadStart returns what the package's ReadStart returns for q,
	// reading it at once; reads are not fenced.
	ReadStart(ctx context.Context, q StartQuery) (StartReads, error)
}

// ReadStart makes the reads that the handling of a message's job (q)
// begins with, each with its own call to s: the contract a StartReader
// keeps in one round trip.
func ReadStart(ctx context.Context, s Store, q StartQuery) (StartReads, error) {
	var st StartReads
	var err error
	if st.Waiting, err = s.WaitingRun(ctx, q.Key); err != nil {
		return st, fmt.Errorf("bot: find the waiting run of %s: %w", q.Key, err)
	}
	if _, err = s.Run(ctx, q.JobID); err == nil {
		st.Stored = true
	} else if !errors.Is(err, ErrNotFound) {
		return st, fmt.Errorf("bot: read run %s: %w", q.JobID, err)
	}
	if th, err := s.Thread(ctx, q.Key); err == nil {
		st.Thread = &th
		if st.Messages, err = s.RecentMessages(ctx, q.Key, th.ResetAt, q.Messages); err != nil {
			return st, fmt.Errorf("bot: read history of %s: %w", q.Key, err)
		}
	} else if !errors.Is(err, ErrNotFound) {
		return st, fmt.Errorf("bot: read thread %s: %w", q.Key, err)
	}
	if st.Setting, err = s.Setting(ctx, q.Setting); errors.Is(err, ErrNotFound) {
		st.Setting = ""
	} else if err != nil {
		return st, fmt.Errorf("bot: read setting %s: %w", q.Setting, err)
	}
	if q.Usage != "" {
		if st.Usage, err = s.Setting(ctx, q.Usage); errors.Is(err, ErrNotFound) {
			st.Usage = ""
		} else if err != nil {
			return st, fmt.Errorf("bot: read setting %s: %w", q.Usage, err)
		}
	}
	if sh, ok := s.(Shared); ok {
		if st.CancelMark, err = sh.CancelMark(ctx, q.Key, q.JobID, q.JobID); err != nil {
			return st, fmt.Errorf("bot: the cancels of %s as a run begins: %w", q.Key, err)
		}
	}
	return st, nil
}

// readStart reads what the handling of message in's job jobID begins
// with: in one round trip with a StartReader store.
func (b *Bot) readStart(ctx context.Context, jobID string, in Incoming) (StartReads, error) {
	q := StartQuery{Key: in.ThreadKey(), JobID: jobID, Setting: personKey(in.Platform, in.UserID), Messages: b.cfg.History + 1}
	if b.cfg.UserDailyTokens > 0 && b.feed != nil {
		// The daily cap's count, which other replicas add to (ledger):
		// read with the rest rather than again on its own (overCap).
		q.Usage = usageKey(in.Platform, in.UserID, b.cfg.Now())
	}
	read := time.Now()
	var st StartReads
	var err error
	if sr, ok := b.store.(StartReader); ok {
		if st, err = sr.ReadStart(ctx, q); err != nil {
			return st, fmt.Errorf("bot: the reads of job %s as it begins: %w", jobID, err)
		}
	} else if st, err = ReadStart(ctx, b.store, q); err != nil {
		return st, err
	}
	if q.Usage != "" {
		b.ledger.counted(q.Usage, st.Usage, read)
	}
	return st, nil
}
