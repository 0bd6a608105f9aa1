// Package postgres keeps tidybot's state in PostgreSQL: the shared store
// several `tidybot serve` replicas may use (TIDYBOT_DATABASE_URL). It
// implements bot.Store as package store does on bbolt, with the same
// guarantees: an event's dedupe key, its message and its job commit in
// one transaction; the outbox commits with a run's end; what people
// wrote is sealed with per-scope data keys (package store/seal) that
// /reset, /disconnect and retention destroy.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidybot/tidybot/bot"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered SQL file of migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order; their numbers
// run from 1 without a gap.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: the name does not start with its number", e.Name())
		}
		raw, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(raw)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want number %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this package knows: Open refuses a
// database of a newer one.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // embedded at build time: a test catches it
	}
	return len(ms)
}

// migrateLock is the advisory lock key migrations hold, so that replicas
// starting together migrate once.
const migrateLock = 0x7469647962 // "tidyb"

// Store is a PostgreSQL-backed bot.Store, safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	keys *keyring
	// applied lists the migrations Open applied.
	applied []int
	// retry, when set, replaces leadRetry (tests).
	retry time.Duration
	// replica names this process's incarnation (see leases) in the
	// leases and outbox entries it owns.
	replica atomic.Pointer[string]
	leases  leases
	// log reports what the store repairs on its own (a job dropped, data
	// keys sealed again).
	log *slog.Logger
	// stopRewrap, when not nil, ends rewrapLoop, which closes
	// rewrapDone.
	stopRewrap, rewrapDone chan struct{}
	// leaseFor, when set, replaces leaseTime (tests).
	leaseFor time.Duration
	// closed is set by Close: background work gives up.
	closed atomic.Bool
	// group commits the fenced writes made at the same moment together.
	group group
}

var _ bot.Store = (*Store)(nil)

type options struct {
	secrets   [][]byte
	now       func() time.Time
	noMigrate bool
	log       *slog.Logger
	// rewrapEvery replaces rewrapEvery (tests).
	rewrapEvery time.Duration
}

// Option configures Open.
type Option func(*options)

// WithSecretKeys gives the TIDYBOT_SECRET_KEY keys (the current one
// first, then older ones during a rotation) from which the master key
// that seals data keys is derived. Without them, a master key is
// generated at first start and kept in the database.
func WithSecretKeys(keys [][]byte) Option { return func(o *options) { o.secrets = keys } }

// WithLogger sets the logger of what the store repairs on its own
// (slog.Default() without it).
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// WithoutMigrate makes Open refuse a database whose schema is older than
// this tidybot's instead of migrating it (tidybot runs: it only reads).
func WithoutMigrate() Option { return func(o *options) { o.noMigrate = true } }

// withRewrapEvery sets how often data keys are sealed again during a
// rotation (tests).
func withRewrapEvery(d time.Duration) Option { return func(o *options) { o.rewrapEvery = d } }

// withClock sets the clock that dates data keys (tests).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Open connects to the database at url (a postgres:// URL), migrates its
// schema to this tidybot's version and sets up the data keys. A schema
// newer than this tidybot knows is refused.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := &options{now: time.Now, log: slog.Default(), rewrapEvery: rewrapEvery}
	for _, opt := range opts {
		opt(o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("store: TIDYBOT_DATABASE_URL is not a valid PostgreSQL URL (postgres://user:password@host:5432/db)")
	}
	keepAlive(cfg)
	if cfg.PingTimeout == 0 {
		// A connection idle for a second is pinged before use: one that
		// died meanwhile (a cut network) costs a second, not a hang.
		cfg.PingTimeout = time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect to PostgreSQL (TIDYBOT_DATABASE_URL): %w", err)
	}
	s := &Store{pool: pool, keys: &keyring{now: o.now}, leases: leases{lost: make(chan struct{}, 1), held: map[string]int64{}}, log: o.log,
		group: group{slot: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}}
	id := newReplicaID()
	s.replica.Store(&id)
	if err := s.open(ctx, o); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, o *options) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: connect to PostgreSQL at %s (TIDYBOT_DATABASE_URL): %w", s.where(), err)
	}
	if err := s.sessionPooling(ctx); err != nil {
		return err
	}
	if o.noMigrate {
		v, err := s.Version(ctx)
		if err != nil {
			return err
		}
		if v > SchemaVersion() {
			return fmt.Errorf("store: the database at %s has schema version %d, newer than this tidybot (%d): upgrade tidybot", s.where(), v, SchemaVersion())
		}
		if v != SchemaVersion() {
			return fmt.Errorf("store: the database at %s has schema version %d, this tidybot %d: run tidybot migrate", s.where(), v, SchemaVersion())
		}
	} else {
		var err error
		if s.applied, err = s.Migrate(ctx); err != nil {
			return err
		}
	}
	if err := s.tx(ctx, func(tx pgx.Tx) error { return s.keys.setUp(ctx, tx, o.secrets, !o.noMigrate) }); err != nil {
		return err
	}
	// During a rotation, replicas still sealing with the old key (first
	// in their list) go on making data keys: they are sealed again in
	// the background, not only here at Open.
	if !o.noMigrate && len(s.keys.masters) > 1 {
		s.stopRewrap, s.rewrapDone = make(chan struct{}), make(chan struct{})
		go s.rewrapLoop(o.rewrapEvery, s.stopRewrap, s.rewrapDone)
	}
	return nil
}

// keepAlive makes every connection of the pool, and the ones taken out
// of it for good (leases, listen, lead), ask for TCP keepalives on both
// ends, and the server end transactions left idle: the server learns of
// a replica cut off by the network after 5 s of silence and 3
// unanswered probes a second apart (not the two hours of the server's
// system default), freeing its session locks, and the replica's side
// learns of a vanished server as soon. The settings are SET once
// connected, not sent at startup, which PgBouncer would refuse
// (unsupported startup parameter); one the URL gives is left alone.
func keepAlive(cfg *pgxpool.Config) {
	c := cfg.ConnConfig
	var set []string
	for _, p := range [][2]string{{"tcp_keepalives_idle", "5"}, {"tcp_keepalives_interval", "1"}, {"tcp_keepalives_count", "3"},
		// A replica frozen (SIGSTOP) or cut off inside a transaction
		// keeps its row locks (a lease's, FOR SHARE) only this long:
		// every transaction of the store runs its statements back to
		// back.
		{"idle_in_transaction_session_timeout", "'5s'"}} {
		if _, given := c.RuntimeParams[p[0]]; !given {
			set = append(set, "SET "+p[0]+" = "+p[1])
		}
	}
	if len(set) > 0 {
		sql := strings.Join(set, "; ")
		after := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if after != nil {
				if err := after(ctx, conn); err != nil {
					return err
				}
			}
			_, err := conn.Exec(ctx, sql)
			return err
		}
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 3}}
	if c.ConnectTimeout > 0 {
		d.Timeout = c.ConnectTimeout
	}
	c.DialFunc = d.DialContext
}

// where names the database without its password.
func (s *Store) where() string {
	c := s.pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// Applied returns the versions of the migrations Open applied.
func (s *Store) Applied() []int { return s.applied }

// Close closes the pool and the lease connection (its leases end).
func (s *Store) Close() error {
	if s.stopRewrap != nil {
		close(s.stopRewrap)
		<-s.rewrapDone
		s.stopRewrap = nil
	}
	err := s.closeLeases()
	s.pool.Close()
	return err
}

// Version returns the database's schema version (0 for an empty one).
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM tidybot_schema`).Scan(&v)
	if isUndefinedTable(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: schema version: %w", err)
	}
	return v, nil
}

// Migrate brings the schema to this tidybot's version, each migration in
// its own transaction under an advisory lock, and returns the versions
// it applied. A database of a newer version is refused.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var done []int
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS tidybot_schema (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM tidybot_schema`).Scan(&v); err != nil {
			return err
		}
		if v > len(ms) {
			return fmt.Errorf("the database at %s has schema version %d, newer than this tidybot (%d): upgrade tidybot", s.where(), v, len(ms))
		}
		for _, m := range ms[v:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO tidybot_schema (version) VALUES ($1)`, m.version); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			done = append(done, m.version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	return done, nil
}

func isUndefinedTable(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && pe.SQLState() == "42P01"
}

// tx runs fn in a transaction, committed when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
