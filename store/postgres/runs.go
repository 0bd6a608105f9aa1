package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidybot/tidybot/bot"
)

// saveRun stores r: its record and, when it has one, its transcript
// (sealed apart); a run without a transcript keeps the stored one.
func (s *Store) saveRun(ctx context.Context, q querier, r *bot.Run) error {
	rec := *r
	rec.Transcript = nil
	raw, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	plains := [][]byte{raw}
	if len(r.Transcript) > 0 {
		plains = append(plains, r.Transcript)
	}
	// One read of the conversation's key for the run and its transcript.
	sealed, id, err := s.keys.sealEach(ctx, q, r.ThreadKey, plains...)
	if err != nil {
		return err
	}
	v := sealed[0]
	var tr, trID []byte
	if len(sealed) > 1 {
		tr, trID = sealed[1], id
	}
	var wait *string
	if r.Status == bot.RunWaiting && r.Waiting != nil {
		wait = &r.Waiting.Key
	}
	return execLater(ctx, q, `INSERT INTO runs (id, thread_key, status, wait_key, created, updated, key_id, value, transcript_key_id, transcript)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET thread_key = excluded.thread_key, status = excluded.status, wait_key = excluded.wait_key,
			created = excluded.created, updated = excluded.updated, key_id = excluded.key_id, value = excluded.value,
			transcript_key_id = coalesce(excluded.transcript_key_id, runs.transcript_key_id),
			transcript = coalesce(excluded.transcript, runs.transcript)`,
		r.ID, r.ThreadKey, string(r.Status), wait, ns(r.Created), ns(r.Updated), id, v, trID, tr)
}

// SaveRun implements bot.Store (with the writes made at the same
// moment: see group).
func (s *Store) SaveRun(ctx context.Context, r *bot.Run) error {
	w := &groupWrite{scopes: []string{r.ThreadKey}, queue: func(p *pipe) error { return s.saveRun(ctx, p, r) }, order: groupOrder(ctx, "")}
	if err := s.group.write(ctx, s, w); err != nil {
		return fmt.Errorf("store: save run %s: %w", r.ID, err)
	}
	return nil
}

// Run implements bot.Store: the run with its transcript.
func (s *Store) Run(ctx context.Context, id string) (*bot.Run, error) {
	var r bot.Run
	err := func() error {
		var v, tr []byte
		err := s.pool.QueryRow(ctx, `SELECT value, transcript FROM runs WHERE id = $1`, id).Scan(&v, &tr)
		if errors.Is(err, pgx.ErrNoRows) {
			return bot.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := s.decode(ctx, s.pool, v, &r); err != nil {
			return err
		}
		if tr != nil {
			pt, err := s.keys.open(ctx, s.pool, tr)
			if err != nil {
				return fmt.Errorf("transcript: %w", err)
			}
			r.Transcript = pt
		}
		return nil
	}()
	if err != nil {
		return nil, fmt.Errorf("store: run %s: %w", id, err)
	}
	return &r, nil
}

// runs decodes the records (no transcript) a query selects, in its order.
func (s *Store) runs(ctx context.Context, sql string, args ...any) ([]*bot.Run, error) {
	xs, err := decodeAll[bot.Run](ctx, s, sql, args...)
	if err != nil {
		return nil, err
	}
	return pointers(xs), nil
}

// pointers returns a pointer to each of xs, in their order.
func pointers[T any](xs []T) []*T {
	out := make([]*T, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// Runs implements bot.Store.
func (s *Store) Runs(ctx context.Context, statuses ...bot.RunStatus) ([]*bot.Run, error) {
	var out []*bot.Run
	var err error
	if len(statuses) == 0 {
		out, err = s.runs(ctx, `SELECT value FROM runs ORDER BY created, id`)
	} else {
		st := make([]string, len(statuses))
		for i, x := range statuses {
			st[i] = string(x)
		}
		out, err = s.runs(ctx, `SELECT value FROM runs WHERE status = ANY($1) ORDER BY created, id`, st)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return out, nil
}

// ThreadRuns implements bot.Store.
func (s *Store) ThreadRuns(ctx context.Context, threadKey string) ([]*bot.Run, error) {
	out, err := s.runs(ctx, `SELECT value FROM runs WHERE thread_key = $1 ORDER BY created, id`, threadKey)
	if err != nil {
		return nil, fmt.Errorf("store: runs of %s: %w", threadKey, err)
	}
	return out, nil
}

// waitingRunSQL selects the waiting runs of conversation $1, newest
// first (firstWaiting picks one).
const waitingRunSQL = `SELECT value FROM runs WHERE thread_key = $1 AND status = 'waiting' ORDER BY created DESC, id DESC`

// WaitingRun implements bot.Store: the thread's newest waiting run.
func (s *Store) WaitingRun(ctx context.Context, threadKey string) (*bot.Run, error) {
	out, err := s.runs(ctx, waitingRunSQL, threadKey)
	if err != nil {
		return nil, fmt.Errorf("store: waiting run of %s: %w", threadKey, err)
	}
	return firstWaiting(out), nil
}

// firstWaiting is the first of runs (waitingRunSQL's) that waits.
func firstWaiting(runs []*bot.Run) *bot.Run {
	for _, r := range runs {
		if r.Waiting != nil {
			return r
		}
	}
	return nil
}

// WaitingRunByKey implements bot.Store. Keys are short and random: of
// two runs that took the same one, the one saved last has it.
func (s *Store) WaitingRunByKey(ctx context.Context, key string) (*bot.Run, error) {
	if key == "" {
		return nil, nil
	}
	out, err := s.runs(ctx, `SELECT value FROM runs WHERE wait_key = $1 AND status = 'waiting' ORDER BY updated DESC, id DESC`, key)
	if err != nil {
		return nil, fmt.Errorf("store: run waiting on %s: %w", key, err)
	}
	for _, r := range out {
		if r.Waiting != nil && r.Waiting.Key == key {
			return r, nil
		}
	}
	return nil, nil
}

// putJob stores a job in arrival order, once per job id.
func (s *Store) putJob(ctx context.Context, q querier, j bot.Job) error {
	v, id, err := s.sealJSON(ctx, q, j.ThreadKey, j)
	if err != nil {
		return err
	}
	if err = execLater(ctx, q, `INSERT INTO jobs (id, thread_key, key_id, value) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`, j.ID, j.ThreadKey, id, v); err != nil {
		return err
	}
	return notifyJob(ctx, q, j.ThreadKey)
}

// DeleteJob implements bot.Store.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	err := s.fencedTx(ctx, nil, nil, func(p *pipe) error {
		p.later(`DELETE FROM jobs WHERE id = $1`, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete job %s: %w", id, err)
	}
	return nil
}

// Jobs implements bot.Store.
func (s *Store) Jobs(ctx context.Context) ([]bot.Job, error) {
	out, err := decodeAll[bot.Job](ctx, s, `SELECT value FROM jobs ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	return out, nil
}

// decodeAll decodes the values a query selects, in its order. It runs
// in no transaction of its own (BEGIN and COMMIT would be two round
// trips more): a statement sees one moment, and reading committed data
// a transaction would not see more of (a data key a value needs is read
// on its own; one destroyed meanwhile fails as it would have a moment
// later).
func decodeAll[T any](ctx context.Context, s *Store, sql string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	return decodeValues[T](ctx, s, vals)
}

// decodeValues decodes stored values (decodeAll's) in their order.
func decodeValues[T any](ctx context.Context, s *Store, vals [][]byte) ([]T, error) {
	out := make([]T, 0, len(vals))
	for _, v := range vals {
		var x T
		if err := s.decode(ctx, s.pool, v, &x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// RunAudit implements bot.Store.
func (s *Store) RunAudit(ctx context.Context, runID string) ([]bot.AuditEntry, error) {
	out, err := decodeAll[bot.AuditEntry](ctx, s, `SELECT value FROM audit WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: journal of %s: %w", runID, err)
	}
	return out, nil
}

// Outbox implements bot.Store.
func (s *Store) Outbox(ctx context.Context) ([]bot.Outbound, error) {
	out, err := decodeAll[bot.Outbound](ctx, s, `SELECT value FROM outbox ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	return out, nil
}

// Commit implements bot.Store: every part of c in one transaction,
// fenced by ctx's lease (see Fence), and an event's intake (c.EventKey)
// by the polling lead ctx carries, if any (see LeadPolling). A
// duplicate event key rolls it back and returns bot.ErrDuplicate.
func (s *Store) Commit(ctx context.Context, c bot.Change) error {
	fresh := true
	var reads func(p *pipe) // what apply needs read first: the event key's freshness, the rows of fields
	if c.EventKey != "" || len(fieldKeys(c.Fields)) > 0 {
		reads = func(p *pipe) {
			if c.EventKey != "" {
				pollGuardLater(ctx, p)
				p.later(markEventSQL, c.EventKey, ns(c.EventAt)).Exec(func(ct pgconn.CommandTag) error {
					fresh = ct.RowsAffected() == 1
					return nil
				})
			}
			lockSettingsLater(p, fieldKeys(c.Fields), fieldsInitial)
		}
	}
	// With the writes made at the same moment (see group).
	var first string
	if len(c.Count) > 0 {
		first = slices.Min(slices.Collect(maps.Keys(c.Count)))
	}
	err := s.group.write(ctx, s, &groupWrite{scopes: changeScopes(c), read: reads, order: groupOrder(ctx, first),
		queue: func(p *pipe) error {
			if !fresh {
				return bot.ErrDuplicate
			}
			return s.apply(ctx, p, c)
		}})
	if errors.Is(err, bot.ErrDuplicate) {
		return bot.ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// changeScopes are the scopes whose keys seal c's parts (see apply).
func changeScopes(c bot.Change) []string {
	var out []string
	if c.Message != nil {
		out = append(out, c.Message.ThreadKey)
	}
	if c.Job != nil {
		out = append(out, c.Job.ThreadKey)
	}
	if c.Run != nil {
		out = append(out, c.Run.ThreadKey)
	}
	if len(c.Send) > 0 {
		out = append(out, scopeOutbox)
	}
	for _, e := range c.Audit {
		out = append(out, e.ThreadKey)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// apply writes c's parts after its event key.
func (s *Store) apply(ctx context.Context, tx querier, c bot.Change) error {
	if c.Thread != nil {
		if err := saveThread(ctx, tx, *c.Thread, false); err != nil {
			return err
		}
	}
	if c.Message != nil {
		if err := s.appendMessage(ctx, tx, *c.Message); err != nil {
			return err
		}
	}
	if c.Job != nil {
		if err := s.putJob(ctx, tx, *c.Job); err != nil {
			return err
		}
	}
	if c.DeleteJob != "" {
		if err := execLater(ctx, tx, `DELETE FROM jobs WHERE id = $1`, c.DeleteJob); err != nil {
			return err
		}
	}
	if c.Run != nil {
		if err := s.saveRun(ctx, tx, c.Run); err != nil {
			return err
		}
	}
	// An entry made under a conversation's lease is that conversation's
	// (see ClaimThread).
	var thread *string
	if f, ok := ctx.Value(fenceKey{}).(fence); ok {
		thread = &f.key
	}
	for _, ob := range c.Send {
		v, id, err := s.sealJSON(ctx, tx, scopeOutbox, ob)
		if err != nil {
			return err
		}
		if err := execLater(ctx, tx, `INSERT INTO outbox (id, key_id, value, owner, platform, thread_key) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`, ob.ID, id, v, s.me(), ob.Platform, thread); err != nil {
			return err
		}
	}
	for _, e := range c.Audit {
		v, id, err := s.sealJSON(ctx, tx, e.ThreadKey, e)
		if err != nil {
			return err
		}
		if err := execLater(ctx, tx, `INSERT INTO audit (run_id, key_id, value) VALUES ($1, $2, $3)`, e.RunID, id, v); err != nil {
			return err
		}
	}
	if err := addCounts(ctx, tx, c.Count); err != nil {
		return err
	}
	return setFields(ctx, tx, c.Fields)
}

// Delivered implements bot.Store, in one transaction: the message leaves
// the outbox and, for a question its run still waits on, its message id
// is recorded in the run. It is fenced by ctx's lease (see Fence). One
// that records no message id goes with the writes made at the same
// moment (see group).
func (s *Store) Delivered(ctx context.Context, ob bot.Outbound, msgID string) error {
	if recordsMessageID(ob, msgID) {
		return s.delivered(ctx, ob, msgID)
	}
	w := &groupWrite{queue: func(p *pipe) error { deliveredLater(p, ob); return nil }, order: groupOrder(ctx, ""), now: true}
	if err := s.group.write(ctx, s, w); err != nil {
		return fmt.Errorf("store: delivered %s: %w", ob.ID, err)
	}
	return nil
}

// recordsMessageID reports whether the delivery of ob as message msgID
// records msgID in its run: a question's (its run is read, then
// written).
func recordsMessageID(ob bot.Outbound, msgID string) bool {
	return ob.RunID != "" && ob.WaitKey != "" && msgID != ""
}

// deliveredLater queues the statements that record the delivery of ob
// but for its message id (see recordsMessageID).
func deliveredLater(p *pipe, ob bot.Outbound) {
	p.later(`DELETE FROM outbox WHERE id = $1`, ob.ID)
	if ob.RunID != "" && ob.WaitKey == "" {
		// An answer: its run's preview record goes with it.
		p.later(`DELETE FROM settings WHERE key = $1`, bot.StreamKey(ob.RunID))
	}
}

// delivered is Delivered of a question whose message id is recorded in
// its run (read first), in a transaction of its own.
func (s *Store) delivered(ctx context.Context, ob bot.Outbound, msgID string) error {
	err := s.fencedTx(ctx, nil, nil, func(tx *pipe) error {
		deliveredLater(tx, ob)
		var v []byte
		err := tx.QueryRow(ctx, `SELECT value FROM runs WHERE id = $1 FOR UPDATE`, ob.RunID).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var r bot.Run
		if err := s.decode(ctx, tx, v, &r); err != nil {
			return err
		}
		if r.Status != bot.RunWaiting || r.Waiting == nil || r.Waiting.Key != ob.WaitKey {
			return nil // answered (or dropped) already
		}
		r.Waiting.MessageID = msgID
		return s.saveRun(ctx, tx, &r)
	})
	if err != nil {
		return fmt.Errorf("store: delivered %s: %w", ob.ID, err)
	}
	return nil
}
