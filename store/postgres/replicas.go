package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/seal"
)

var _ bot.Shared = (*Store)(nil)

// jobsChannel is the NOTIFY channel a commit that stores a job signals,
// with the schema, a newline and the job's conversation key as its
// payload (databases kept in several schemas of one server, as in
// tests, share the channel). Builds before 2026-11-29 sent the schema
// alone, and read only that: they are woken by none of these, and
// find the jobs at their fill a second (a rolling update's while).
const jobsChannel = "tidybot_jobs"

// cancelChannel carries /cancel to the replica running the run: the
// schema, a newline and the conversation's key.
const cancelChannel = "tidybot_cancel"

// leases is this process's part in the sharing of conversations. A
// conversation's lease is a row of the leases table (owner, epoch); a
// holder's writes for it are fenced by the epoch (see Fence). This
// process is alive, to the other replicas, while its row in replicas
// has a recent beat (set to the database's now() every beatEvery on
// the lease connection) and its replica lock (a session advisory lock on
// that connection) is held: a lease whose owner fails either may be
// taken. A process that dies frees its leases at once (its socket
// closes, and with it the lock); one that hangs (a pause, a cut
// network) loses them a lease time after its last beat.
//
// Each lease connection is an incarnation with a new id: after its loss
// (a failed or late beat, reported on lost) the process starts again as
// another replica, which never waits for a lock the dead session may
// still hold on the server.
type leases struct {
	// lost receives a value (one for several) when the connection was
	// lost; see LeasesLost.
	lost chan struct{}

	// mu protects the fields below; a connection runs one query at a time.
	mu   sync.Mutex
	conn *pgx.Conn
	stop chan struct{} // closed when conn is dropped: its beats end
	done chan struct{} // closed once conn is closed
	// making, while a lease connection is being made (makeLeases), is
	// closed once it is; makeErr is why the last one was not.
	making  chan struct{}
	makeErr error
	// held is the epoch of each conversation this incarnation holds.
	held map[string]int64
	// beat is when the last beat that the database accepted was sent.
	beat time.Time
}

// leaseTime is how long after a replica's last beat another may take
// its leases; beatEvery is how often a replica beats, and beatTimeout how
// long a beat may take before the replica gives its leases up. A
// replica stops counting on its leases (LeasesLost) once its last
// accepted beat is older than leaseTime-beatTimeout by its own clock,
// before another replica may take them by the database's.
const (
	leaseTime   = 10 * time.Second
	beatEvery   = 2 * time.Second
	beatTimeout = 3 * time.Second
)

// holdTimeout bounds Hold, Release and Cancel: a database that does not
// answer costs a message's intake this long at most, never the lease
// time.
const holdTimeout = time.Second

// leaseApp is the application_name of the lease connection, for whoever
// reads pg_stat_activity.
const leaseApp = "tidybot leases"

func newReplicaID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// deadOwner is the SQL condition that replica id col (an expression) is
// dead, with lease, a parameter, the lease time in seconds: its beat is
// older than the lease time by the database's clock (or it has none),
// or its replica lock is free. The lock is tried in shared mode (held by
// the statement's transaction until it ends): a live replica holds its
// own exclusively, so the try fails, while statements of several
// replicas trying a dead one's at once all find it free (an exclusive
// try made a dead owner look alive to every other statement meanwhile:
// the conversation's new holder claimed none of its answers, and
// answered the next message first). A lease or an outbox entry whose
// owner is dead may be taken.
func deadOwner(col, lease string) string {
	return `(NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = ` + col + ` AND r.beat > now() - make_interval(secs => ` + lease + `))
		OR pg_try_advisory_xact_lock_shared(hashtext('tidybot replica ' || current_schema()), hashtext(` + col + `)))`
}

// me is this incarnation's replica id.
func (s *Store) me() string { return *s.replica.Load() }

// lease returns the lease time (tests shorten it).
func (s *Store) lease() time.Duration {
	if s.leaseFor > 0 {
		return s.leaseFor
	}
	return leaseTime
}

// beatPeriod returns the time between beats: a fifth of the lease time.
func (s *Store) beatPeriod() time.Duration { return min(beatEvery, s.lease()/5) }

// ensureLeases waits, up to ctx's end, for the lease connection: made
// (by one goroutine, makeLeases) if there is none, made again if it was
// lost (its beat dropped it). A store that never leases, as tidybot
// runs, holds none. No
// query runs under mu: a slow or cut database holds up only the callers
// that need it, each up to its own deadline.
func (s *Store) ensureLeases(ctx context.Context) error {
	s.leases.mu.Lock()
	if s.leases.conn != nil { // its beat finds a failure (dropLeases)
		s.leases.mu.Unlock()
		return nil
	}
	if s.leases.making == nil {
		s.leases.making = make(chan struct{})
		go s.makeLeases(s.leases.making, s.me())
	}
	making := s.leases.making
	s.leases.mu.Unlock()
	select {
	case <-making:
	case <-ctx.Done():
		return fmt.Errorf("store: lease connection: %w", ctx.Err())
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.conn == nil {
		return fmt.Errorf("store: lease connection: %w", s.leases.makeErr)
	}
	return nil
}

// makeLeases makes the lease connection of incarnation me, with its
// replica lock and its row in replicas, and closes made.
func (s *Store) makeLeases(made chan struct{}, me string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := s.leaseConn(ctx, me)
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	s.leases.making, s.leases.makeErr = nil, err
	defer close(made)
	if err != nil {
		return
	}
	if s.closed.Load() || s.me() != me {
		go closeConn(conn)
		s.leases.makeErr = errors.New("the store was closed")
		return
	}
	s.leases.beat = time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	s.leases.conn, s.leases.stop, s.leases.done = conn, stop, done
	go s.watchLeases(conn, stop, done)
}

// leaseConn makes a lease connection for incarnation me: its replica
// lock taken (an id is new: never held, no wait), its row in replicas
// beating.
func (s *Store) leaseConn(ctx context.Context, me string) (*pgx.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	var locked bool
	err = conn.QueryRow(ctx, `SELECT set_config('application_name', $2, false) IS NOT NULL,
			pg_try_advisory_lock(hashtext('tidybot replica ' || current_schema()), hashtext($1))`, me, leaseApp).Scan(nil, &locked)
	if err == nil && !locked {
		err = fmt.Errorf("the replica lock of %s is taken", me)
	}
	if err == nil {
		_, err = conn.Exec(ctx, `INSERT INTO replicas (id, beat) VALUES ($1, now()) ON CONFLICT (id) DO UPDATE SET beat = now()`, me)
	}
	if err != nil {
		go closeConn(conn)
		return nil, fmt.Errorf("replica lock: %w", err)
	}
	return conn, nil
}

// closeConn closes conn, waiting a second at most.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// dropLeases ends this incarnation after the loss of its lease
// connection: the connection is closed, the leases forgotten (the
// writes fenced by them are refused once another replica takes them),
// a new id taken for the next incarnation, and the loss reported on
// lost. The old incarnation's rows are handed over in the background
// (retire). mu must be held.
func (s *Store) dropLeases() {
	close(s.leases.stop) // watchLeases closes the connection, lost already
	s.leases.conn, s.leases.stop, s.leases.done = nil, nil, nil
	clear(s.leases.held)
	old := s.me()
	next := newReplicaID()
	s.replica.Store(&next)
	// The pool's connections may be as dead as this one (a cut
	// network): new ones are made for what comes next.
	s.pool.Reset()
	go s.retire(old, next)
	select {
	case s.leases.lost <- struct{}{}:
	default: // a loss not yet read covers this one
	}
}

// retire hands what incarnation old left to next, once the database
// answers: old is marked dead (its beat at -infinity: its leases are
// free for any replica at once, whatever the server thinks of its
// session), its leases released (their epochs stay: a late write of old
// is refused once another takes one) and its outbox entries of no
// conversation made next's, as this process still has them to post. A
// conversation's entries stay old's, for the conversation's next holder
// to claim (ClaimThread), this process or another: made next's, they
// were a live replica's that another holder left alone, while this one
// had dropped their posts (Owns refused them to next) and answered
// nothing there. It tries for a lease time; after that, old is dead to
// every replica anyway.
func (s *Store) retire(old, next string) {
	for deadline := time.Now().Add(s.lease()); time.Now().Before(deadline); time.Sleep(s.beatPeriod()) {
		ctx, cancel := context.WithTimeout(context.Background(), beatTimeout)
		err := s.tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE replicas SET beat = '-infinity' WHERE id = $1`, old); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE leases SET owner = NULL WHERE owner = $1`, old); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE outbox SET owner = $2 WHERE owner = $1 AND thread_key IS NULL`, old, next)
			return err
		})
		cancel()
		if err == nil || s.closed.Load() {
			return
		}
	}
}

// watchLeases beats on conn every beatPeriod until it is dropped
// (stop), then closes it (only this goroutine uses conn) and done.
func (s *Store) watchLeases(conn *pgx.Conn, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer closeConn(conn)
	t := time.NewTicker(s.beatPeriod())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.beatOn(conn)
	}
}

// beatOn sets this replica's beat to the database's now() on conn (only
// this goroutine queries it), and drops conn when the beat fails, comes
// too late by this process's clock (it was paused, or the database
// slow: another replica may have taken its leases), or finds the beat
// already older than the lease time by the database's clock (another
// replica may have).
func (s *Store) beatOn(conn *pgx.Conn) {
	s.leases.mu.Lock()
	if s.leases.conn != conn {
		s.leases.mu.Unlock()
		return
	}
	late := time.Since(s.leases.beat) > s.lease()-beatTimeout
	me := s.me()
	s.leases.mu.Unlock()
	sent := time.Now()
	var err error
	if !late {
		ctx, cancel := context.WithTimeout(context.Background(), min(beatTimeout, s.lease()/3))
		var ok bool
		err = conn.QueryRow(ctx, `UPDATE replicas SET beat = now() WHERE id = $1 AND beat > now() - make_interval(secs => $2) RETURNING true`,
			me, s.lease().Seconds()).Scan(&ok)
		cancel()
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.conn != conn {
		return
	}
	if late || err != nil {
		s.dropLeases()
		return
	}
	s.leases.beat = sent
}

// LeasesLost implements bot.Shared: a value comes after this process
// lost its leases with its lease connection or its beat (see beatOn).
func (s *Store) LeasesLost() <-chan struct{} {
	return s.leases.lost
}

// Hold implements bot.Shared: the lease is taken when it is free,
// this incarnation's already (again, with a new epoch), or its owner is
// dead: its beat older than the lease time, or its replica lock free
// (tried in the statement's own transaction). Its epoch is kept for
// Fence.
func (s *Store) Hold(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	if err := s.ensureLeases(ctx); err != nil {
		return false, err
	}
	me := s.me()
	var epoch int64
	err := s.pool.QueryRow(ctx, `INSERT INTO leases AS l (thread_key, owner, epoch) VALUES ($1, $2, nextval('lease_epochs'))
		ON CONFLICT (thread_key) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch
		WHERE l.owner IS NULL OR l.owner = $2 OR `+deadOwner("l.owner", "$3")+`
		RETURNING epoch`, key, me, s.lease().Seconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: hold %s: %w", key, err)
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.me() != me {
		return false, nil // lost meanwhile: the lease is the dead incarnation's, released by retire
	}
	s.leases.held[key] = epoch
	return true, nil
}

// Release implements bot.Shared: the lease is freed if this
// incarnation still holds it at its epoch (its epoch stays: a late
// write fenced by it is accepted until another replica takes it).
//
// With idle, the lease is kept while the conversation has a job
// stored (one another replica stored after the holder last read its
// work, whose offer this lease refused) and the lease is still this
// incarnation's at its epoch (not taken meanwhile: Work would hand out
// what the new holder runs), and Release reports that it kept it. The
// look and the release are one statement: a job committed before it
// began is seen, and one committed after it finds the lease free when
// its replica offers it (its Hold comes after its commit), but for one
// whose Hold falls within the statement, before the UPDATE reaches the
// lease's row: refused and not seen, it waits for the feeder's next
// fill (a second).
func (s *Store) Release(ctx context.Context, key string, idle bool) (bool, error) {
	s.leases.mu.Lock()
	epoch, ok := s.leases.held[key]
	delete(s.leases.held, key)
	me := s.me()
	s.leases.mu.Unlock()
	if !ok {
		return false, nil // lost (or fenced) since: not ours to free
	}
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	var busy bool
	err := s.pool.QueryRow(ctx, `WITH busy AS (SELECT $4 AND EXISTS (SELECT FROM jobs WHERE thread_key = $1)
			AND EXISTS (SELECT FROM leases WHERE thread_key = $1 AND owner = $2 AND epoch = $3) AS b),
		freed AS (UPDATE leases SET owner = NULL WHERE thread_key = $1 AND owner = $2 AND epoch = $3 AND NOT (SELECT b FROM busy) RETURNING 1)
		SELECT b FROM busy`, key, me, epoch, idle).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("store: release %s: %w", key, err)
	}
	if !busy {
		return false, nil
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.me() != me {
		return false, nil // lost meanwhile: the lease is the dead incarnation's
	}
	s.leases.held[key] = epoch
	return true, nil
}

// fenceKey is the context key of a fence.
type fenceKey struct{}

// fence is a lease as held when a job began: the writes made with it
// are refused once another holder took the lease.
type fence struct {
	key   string
	epoch int64
}

// Fence implements bot.Shared: ctx carries the lease of key this
// process holds now, if it does.
func (s *Store) Fence(ctx context.Context, key string) context.Context {
	s.leases.mu.Lock()
	epoch, ok := s.leases.held[key]
	s.leases.mu.Unlock()
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, fence{key: key, epoch: epoch})
}

// fenceGuard, when ctx carries a fence, queues on p its guard: the
// statements after it run only while the lease is at the fence's
// epoch, its row locked FOR SHARE so that no replica takes the lease
// before p's transaction ends (its Hold waits, then reads what p
// wrote); else p's transaction fails with bot.ErrFenced.
func (s *Store) fenceGuard(ctx context.Context, p *pipe) {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok {
		return
	}
	p.guardLater(func() error { return s.refused(f) }, fenceGuardSQL, f.key, f.epoch)
}

// writeGuards queues on p the guards of a write made with ctx: its
// lease's epoch (fenceGuard) and its cancel mark (cancelsGuard). Every
// fenced write, alone or in a shared transaction, asks here.
func (s *Store) writeGuards(ctx context.Context, p *pipe) {
	s.fenceGuard(ctx, p)
	cancelsGuard(ctx, p)
}

// keptKeys seals p's statements with keys kept from an earlier
// transaction (keyring.sealing), each guarded: one destroyed meanwhile
// fails p's transaction with errKeyGone.
func keptKeys(p *pipe, keys map[string]lockedKey, ids [][]byte) {
	p.keys = keys
	for _, id := range ids {
		p.guardLater(func() error { return errKeyGone }, keyGuardSQL, id)
	}
}

// refused forgets the lease of f (Work says so to the feeder) and
// returns the refusal of a write fenced by it.
func (s *Store) refused(f fence) error {
	s.leases.mu.Lock()
	if s.leases.held[f.key] == f.epoch {
		delete(s.leases.held, f.key)
	}
	s.leases.mu.Unlock()
	return fmt.Errorf("%w: the lease of %s was taken by another replica (ours was epoch %d)", bot.ErrFenced, f.key, f.epoch)
}

// fencedTx runs a transaction that checks ctx's fence and cancel mark
// before fn's statements, which may seal with the keys of scopes. When
// there is no prepare and each scope's key is kept from an earlier
// transaction (keyring.sealing), it is one round trip: BEGIN, guards
// (writeGuards, keptKeys), fn's statements and COMMIT; a kept key destroyed meanwhile fails its guard,
// and the transaction is made again as follows. Otherwise two: the
// first sends BEGIN, the same guards, the locking of the scopes' keys
// and what prepare (when set) queued (the reads fn needs, and locks);
// the second fn's statements and COMMIT. A failed guard rolls it all
// back.
func (s *Store) fencedTx(ctx context.Context, scopes []string, prepare func(p *pipe), fn func(p *pipe) error) error {
	if prepare == nil {
		if keys, ids, ok := s.keys.sealingKeys(scopes); ok {
			err := s.pipeTx(ctx, func(p *pipe) error {
				s.writeGuards(ctx, p)
				keptKeys(p, keys, ids)
				return fn(p)
			})
			if !errors.Is(err, errKeyGone) {
				return err
			}
			s.keys.forgetSealing(ids)
		}
	}
	return s.pipeTx(ctx, func(p *pipe) error {
		s.writeGuards(ctx, p)
		s.keys.lockLater(p, scopes...)
		if prepare != nil {
			prepare(p)
		}
		if err := p.flush(ctx); err != nil {
			return err
		}
		return fn(p)
	})
}

// Pending implements bot.Shared: the conversations with work whose
// lease is free, this incarnation's or a dead owner's (those of a live
// replica are its own to run, and would cost a refused Hold each),
// with all, any; an answer a dead process left in the outbox
// (ClaimThread) or an unfinished run first, then by their oldest job,
// this incarnation's last (the feeder only notes that they have more).
func (s *Store) Pending(ctx context.Context, platforms []string, n int, all bool) ([]string, error) {
	prefixes := make([]string, len(platforms))
	for i, p := range platforms {
		prefixes[i] = p + ":%"
	}
	rows, err := s.pool.Query(ctx, `SELECT w.thread_key FROM (
			SELECT DISTINCT thread_key, 0 AS pass, 0::bigint AS at FROM outbox o
				WHERE thread_key IS NOT NULL AND owner IS DISTINCT FROM $3 AND (owner IS NULL OR `+deadOwner("o.owner", "$4")+`)
			UNION ALL
			SELECT thread_key, 0, min(created) FROM runs WHERE status IN ('working', 'queued') GROUP BY thread_key
			UNION ALL
			SELECT thread_key, 1, min(seq) FROM jobs GROUP BY thread_key
		) w LEFT JOIN leases l ON l.thread_key = w.thread_key
		WHERE w.thread_key LIKE ANY($1) AND ($5 OR l.owner IS NULL OR l.owner = $3 OR `+deadOwner("l.owner", "$4")+`)
		GROUP BY w.thread_key, l.owner ORDER BY l.owner IS NOT DISTINCT FROM $3, min(pass), min(at) LIMIT $2`, prefixes, n, s.me(), s.lease().Seconds(), all)
	if err != nil {
		return nil, fmt.Errorf("store: pending conversations: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: pending conversations: %w", err)
	}
	return keys, nil
}

// Work implements bot.Shared. A conversation whose lease this
// incarnation no longer holds (lost, or taken by another replica as a
// fenced write found) has none for it: bot.ErrFenced.
func (s *Store) Work(ctx context.Context, key string) ([]*bot.Run, []bot.Job, error) {
	s.leases.mu.Lock()
	_, held := s.leases.held[key]
	s.leases.mu.Unlock()
	if !held {
		return nil, nil, fmt.Errorf("store: work of %s: %w", key, bot.ErrFenced)
	}
	runs, err := s.runs(ctx, `SELECT value FROM runs WHERE thread_key = $1 AND status IN ('working', 'queued') ORDER BY created, id`, key)
	if err != nil {
		return nil, nil, fmt.Errorf("store: unfinished runs of %s: %w", key, err)
	}
	jobs, err := s.threadJobs(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("store: jobs of %s: %w", key, err)
	}
	return runs, jobs, nil
}

// threadJobs returns the jobs of conversation key in order, each
// decoded on its own. A job whose data key was destroyed can never be
// read (a destroy seals again what its keys seal, under lockKeys, so
// only a database written by an older tidybot holds one): it is deleted
// and logged, so that the jobs after it are answered.
func (s *Store) threadJobs(ctx context.Context, key string) ([]bot.Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, value FROM jobs WHERE thread_key = $1 ORDER BY seq`, key) // no transaction: see decodeAll
	if err != nil {
		return nil, err
	}
	type rec struct {
		ID  string
		Raw []byte
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
	if err != nil {
		return nil, err
	}
	var out []bot.Job
	for _, r := range recs {
		j, ok, err := s.jobOrDrop(ctx, key, r.ID, r.Raw)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// jobOrDrop decodes job id of conversation key, read as raw; one whose
// data key was destroyed is dropped (false) only if it is still stored
// as read: a /reset that committed since it was read may have sealed it
// again with a new key before destroying the old one (DeleteConversation
// keeps the jobs), and then it is read again.
func (s *Store) jobOrDrop(ctx context.Context, key, id string, raw []byte) (bot.Job, bool, error) {
	for {
		var j bot.Job
		err := s.decode(ctx, s.pool, raw, &j)
		if err == nil {
			return j, true, nil
		}
		if !errors.Is(err, seal.ErrKeyGone) {
			return j, false, fmt.Errorf("job %s: %w", id, err)
		}
		tag, err := s.pool.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND value = $2`, id, raw)
		if err != nil {
			return j, false, fmt.Errorf("drop job %s: %w", id, err)
		}
		if tag.RowsAffected() == 1 {
			s.log.Error("job unreadable: its data key was destroyed; dropped", slog.String("thread_key", key), slog.String("job_id", id))
			return j, false, nil
		}
		err = s.pool.QueryRow(ctx, `SELECT value FROM jobs WHERE id = $1`, id).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return j, false, nil // done meanwhile
		}
		if err != nil {
			return j, false, fmt.Errorf("job %s: %w", id, err)
		}
	}
}

// Listen implements bot.Shared: LISTEN on a connection of its own,
// until ctx ends (nil) or the connection fails.
func (s *Store) Listen(ctx context.Context, wake func(key string), cancel func(key string)) error {
	err := s.listen(ctx, wake, cancel)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("store: listen: %w", err)
}

func (s *Store) listen(ctx context.Context, wake func(key string), cancel func(key string)) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := c.Hijack() // never back to the pool in the LISTEN state
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+jobsChannel+"; LISTEN "+cancelChannel); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case jobsChannel:
			if key, ok := strings.CutPrefix(n.Payload, schema+"\n"); ok {
				wake(key)
			} else if n.Payload == schema {
				wake("") // an earlier build's: no key
			}
		case cancelChannel:
			if key, ok := strings.CutPrefix(n.Payload, schema+"\n"); ok {
				cancel(key)
			}
		}
	}
}

// Cancel implements bot.Shared: when the conversation has an
// unfinished run or a job (a run not saved yet works on its job), a
// cancel row is stored and every replica is woken; the row is what the
// run's replica reads at the run's next step (Cancels), the
// notification only wakes it sooner. The row names the run it stops:
// the unfinished run (run; the oldest, should there be several), else
// the oldest job (job), so that the run resumed, or begun from that
// job, later takes the cancel as stored since it began (CancelMark).
// Rows older than an hour go.
func (s *Store) Cancel(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	var stored bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO cancels (thread_key, job, run)
			SELECT $1, CASE WHEN u.id IS NULL THEN coalesce(j.oldest, 0) ELSE 0 END, coalesce(u.id, '')
			FROM (SELECT min(seq) AS oldest FROM jobs WHERE thread_key = $1) j
			LEFT JOIN LATERAL (SELECT id FROM runs WHERE thread_key = $1 AND status IN ('working', 'queued')
				ORDER BY created, id LIMIT 1) u ON true
			WHERE u.id IS NOT NULL OR j.oldest IS NOT NULL
			RETURNING true`, key).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM cancels WHERE at < now() - interval '1 hour'`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, current_schema() || E'\n' || $2)`, cancelChannel, key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: cancel %s: %w", key, err)
	}
	return stored, nil
}

// cancelMarkSQL reads CancelMark($1, $2, $3).
const cancelMarkSQL = `SELECT coalesce(max(id), 0) FROM cancels WHERE thread_key = $1
	AND job <> coalesce((SELECT seq FROM jobs WHERE id = $2), -1) AND (run = '' OR run <> $3)`

// CancelMark implements bot.Shared: the latest cancel of conversation
// key but those Cancel stored for job jobID or run runID while it
// waited.
func (s *Store) CancelMark(ctx context.Context, key, jobID, runID string) (int64, error) {
	var mark int64
	err := s.pool.QueryRow(ctx, cancelMarkSQL, key, jobID, runID).Scan(&mark)
	if err != nil {
		return 0, fmt.Errorf("store: cancel mark of %s: %w", key, err)
	}
	return mark, nil
}

// Cancels implements bot.Shared.
func (s *Store) Cancels(ctx context.Context, keys []string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT thread_key, max(id) FROM cancels WHERE thread_key = ANY($1) GROUP BY thread_key`, keys)
	if err != nil {
		return nil, fmt.Errorf("store: cancels: %w", err)
	}
	out := map[string]int64{}
	var key string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&key, &id}, func() error {
		out[key] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: cancels: %w", err)
	}
	return out, nil
}

// notifyJob signals the jobs channel, with conversation key, at the
// commit of q's transaction.
func notifyJob(ctx context.Context, q querier, key string) error {
	return execLater(ctx, q, `SELECT pg_notify($1, current_schema() || E'\n' || $2)`, jobsChannel, key)
}

// ClaimOutbox implements bot.Shared: an entry's owner is dead when its
// beat is older than the lease time or its replica lock is free (tried
// in the claim's own transaction); the entries of dead owners (and of
// none) that belong to no conversation become this incarnation's
// (alive first: its lease connection is made) in one UPDATE, a
// compare-and-set on their owner, which two replicas claiming together
// cannot both make. A conversation's entries are its lease holder's to
// take (ClaimThread).
func (s *Store) ClaimOutbox(ctx context.Context, platforms []string) ([]bot.Outbound, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := s.ensureLeases(lctx) // alive before owning entries
	cancel()
	if err != nil {
		return nil, err
	}
	out, err := decodeAll[bot.Outbound](ctx, s, `UPDATE outbox o SET owner = $1
		WHERE (o.platform IS NULL OR o.platform = ANY($2)) AND o.thread_key IS NULL
			AND (o.owner IS NULL OR (o.owner <> $1 AND `+deadOwner("o.owner", "$3")+`))
		RETURNING value`, s.me(), platforms, s.lease().Seconds())
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// ClaimThread implements bot.Shared: under the lease of conversation
// key, checked in the same transaction (ErrFenced when another replica
// took it), the conversation's entries whose owner is dead become this
// incarnation's, a compare-and-set on their owner, and are returned
// with those that are this incarnation's already: the entries of this
// process's previous incarnation, which retire handed over, had their
// posts refused meanwhile (Owns: not this incarnation's).
func (s *Store) ClaimThread(ctx context.Context, key string) ([]bot.Outbound, error) {
	s.leases.mu.Lock()
	_, held := s.leases.held[key]
	s.leases.mu.Unlock()
	if !held {
		return nil, fmt.Errorf("store: claim the outbox of %s: %w", key, bot.ErrFenced)
	}
	var out []bot.Outbound
	err := s.fencedTx(s.Fence(ctx, key), nil, nil, func(tx *pipe) error {
		out = nil // a transaction tried again starts over
		rows, err := tx.Query(ctx, `WITH c AS (UPDATE outbox o SET owner = $1
				WHERE o.thread_key = $2 AND (o.owner IS NULL OR o.owner = $1 OR `+deadOwner("o.owner", "$3")+`)
				RETURNING seq, value)
			SELECT value FROM c ORDER BY seq`, s.me(), key, s.lease().Seconds())
		if err != nil {
			return err
		}
		vals, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		if len(vals) == 0 {
			return errNothingWritten // the usual case: no commit (its fence was checked)
		}
		for _, v := range vals {
			var ob bot.Outbound
			if err := s.decode(ctx, tx, v, &ob); err != nil {
				return err
			}
			out = append(out, ob)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim the outbox of %s: %w", key, err)
	}
	return out, nil
}

// Owns implements bot.Shared: the entry is stored and is this
// incarnation's (or nobody's).
func (s *Store) Owns(ctx context.Context, id string) (bool, error) {
	var owns bool
	err := s.pool.QueryRow(ctx, `SELECT owner IS NULL OR owner = $2 FROM outbox WHERE id = $1`, id, s.me()).Scan(&owns)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: owner of %s: %w", id, err)
	}
	return owns, nil
}

// closeLeases ends the lease connection, freeing every lease (released
// first, for a replica that finds the session's end late) and the
// replica lock.
func (s *Store) closeLeases() error {
	s.closed.Store(true)
	s.leases.mu.Lock()
	if s.leases.conn == nil {
		s.leases.mu.Unlock()
		return nil
	}
	close(s.leases.stop) // watchLeases closes the connection after its beat in flight
	done, me := s.leases.done, s.me()
	s.leases.conn, s.leases.stop, s.leases.done = nil, nil, nil
	clear(s.leases.held)
	s.leases.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE leases SET owner = NULL WHERE owner = $1`, me); err != nil {
		return fmt.Errorf("store: release the leases: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1 OR beat < now() - interval '1 day'`, me); err != nil {
		return fmt.Errorf("store: forget this replica: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("store: close lease connection: %w", ctx.Err())
	}
	return nil
}
