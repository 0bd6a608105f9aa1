package postgres

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidybot/tidybot/store/seal"
)

// Data keys, as in package store (see store/seal.go there): each scope
// (a conversation's thread key, a Todoist account, a pending request,
// the outbox) seals its values with a key of the period, kept in
// data_keys sealed with the master key. Deleting a scope's data destroys
// its keys, and retention destroys the keys of periods it has passed,
// sealing again first the few values still sealed with them. On
// PostgreSQL a deleted row is gone once vacuumed, but the values are
// sealed the same way, so that a backup, a WAL archive or a dump of the
// tables shows no one's words without the keys.

const (
	scopeOutbox   = "outbox"
	scopeSnapshot = "snapshot:" // + account key
	scopeNone     = "-"
)

// scopeOf is the data keys' scope of scope: scopeNone for "" (a value of
// no conversation).
func scopeOf(scope string) string {
	if scope == "" {
		return scopeNone
	}
	return scope
}

// metaMaster is the meta row of the master key generated when no
// TIDYBOT_SECRET_KEY is given.
const metaMaster = "data_master_key"

// querier is a transaction or the pool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type keyring struct {
	masters []cipher.AEAD
	now     func() time.Time
	opened  seal.Cache

	// mu protects sealing.
	mu sync.Mutex
	// sealing is the key each scope sealed with last, with its period:
	// a transaction may seal with it without reading it first, as long
	// as it checks in the same transaction that the key is still there,
	// locking it as current does (keyGuard); a key destroyed meanwhile
	// fails that check, and the transaction is made again with the keys
	// read (fencedTx).
	sealing map[string]sealingKey
}

// sealingKey is a scope's key in keyring.sealing.
type sealingKey struct {
	period int64
	key    lockedKey
}

// remember keeps scope's key of period for the transactions after.
func (k *keyring) remember(scope string, period int64, lk lockedKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sealing == nil {
		k.sealing = map[string]sealingKey{}
	}
	k.sealing[scope] = sealingKey{period, lk}
}

// sealingKeys returns the keys scopes sealed with last, when each has
// one of this period, and their ids (each once).
func (k *keyring) sealingKeys(scopes []string) (map[string]lockedKey, [][]byte, bool) {
	period := seal.PeriodOf(k.now())
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := make(map[string]lockedKey, len(scopes))
	var ids [][]byte
	for _, sc := range scopes {
		sc = scopeOf(sc)
		sk, ok := k.sealing[sc]
		if !ok || sk.period != period {
			return nil, nil, false
		}
		if _, dup := keys[sc]; !dup && !slices.ContainsFunc(ids, func(id []byte) bool { return bytes.Equal(id, sk.key.id) }) {
			ids = append(ids, sk.key.id)
		}
		keys[sc] = sk.key
	}
	return keys, ids, true
}

// forgetSealing drops the kept keys of ids (destroyed, or not found).
func (k *keyring) forgetSealing(ids [][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for sc, sk := range k.sealing {
		if slices.ContainsFunc(ids, func(id []byte) bool { return bytes.Equal(id, sk.key.id) }) {
			delete(k.sealing, sc)
		}
	}
}

// aead returns data key id's cipher.
func (k *keyring) aead(ctx context.Context, q querier, id []byte) (cipher.AEAD, error) {
	return k.opened.Cipher(k.masters, id, func() ([]byte, error) {
		var sealed []byte
		err := q.QueryRow(ctx, `SELECT sealed FROM data_keys WHERE id = $1`, id).Scan(&sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, seal.ErrKeyGone
		}
		return sealed, err
	})
}

// lockedKey is a data key a pipe's transaction locked FOR SHARE (or
// made): it may seal with it until it ends.
type lockedKey struct {
	id []byte
	a  cipher.AEAD
}

// currentSQL selects scope $1's key of period $2, locking it FOR SHARE
// until the transaction ends: a destroy (which deletes it, a FOR UPDATE
// lock) waits for the values sealed with it to commit, then seals them
// again; a destroy that went first leaves no row here. (One statement a
// scope, not one for all with = ANY: its plan is made once, not at each
// run.)
const currentSQL = `SELECT d.id, d.sealed FROM current_keys c JOIN data_keys d ON d.id = c.id
	WHERE c.scope = $1 AND c.period = $2 FOR SHARE OF d`

// lockLater queues, on p, the locking and reading of the current keys
// of scopes (in the same round trip), which current then finds in
// p.keys instead of reading each on its own; a scope with none gets one
// from current, as without. The caller's scopes are left as they are.
func (k *keyring) lockLater(p *pipe, scopes ...string) {
	if len(k.masters) == 0 || len(scopes) == 0 {
		return
	}
	sorted := make([]string, len(scopes))
	for i, sc := range scopes {
		sorted[i] = scopeOf(sc)
	}
	period := seal.PeriodOf(k.now())
	slices.Sort(sorted) // locked in one order
	for _, scope := range slices.Compact(sorted) {
		p.later(currentSQL, scope, period).Query(func(rows pgx.Rows) error {
			if p.looked == nil {
				p.looked = map[string]bool{}
			}
			p.looked[scope] = true
			for rows.Next() {
				var id, sealed []byte
				if err := rows.Scan(&id, &sealed); err != nil {
					return err
				}
				a, err := k.opened.Cipher(k.masters, id, func() ([]byte, error) { return sealed, nil })
				if err != nil {
					return err
				}
				if p.keys == nil {
					p.keys = map[string]lockedKey{}
				}
				p.keys[scope] = lockedKey{id, a}
				k.remember(scope, period, lockedKey{id, a})
			}
			return rows.Err()
		})
	}
}

// current returns the id and cipher of the key sealing scope's new
// values, making one when the scope has none for this period. On a
// pipe, a key its transaction locked already is used again.
func (k *keyring) current(ctx context.Context, q querier, scope string) ([]byte, cipher.AEAD, error) {
	if len(k.masters) == 0 {
		return nil, nil, seal.ErrNoKeys
	}
	p, _ := q.(*pipe)
	if p != nil {
		if lk, ok := p.keys[scope]; ok {
			return lk.id, lk.a, nil
		}
	}
	var id []byte
	var a cipher.AEAD
	var err error
	if p != nil && p.looked[scope] {
		// Its transaction found none (lockLater): a new one, written
		// with the transaction's next statements, not read again (a new
		// conversation's first write: three round trips fewer).
		id, a, err = k.make(ctx, p, scope, true)
	} else {
		id, a, err = k.currentRead(ctx, q, scope)
	}
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		if p.keys == nil {
			p.keys = map[string]lockedKey{}
		}
		p.keys[scope] = lockedKey{id, a}
	}
	k.remember(scope, seal.PeriodOf(k.now()), lockedKey{id, a})
	return id, a, nil
}

// currentRead is current without a pipe's keys.
func (k *keyring) currentRead(ctx context.Context, q querier, scope string) ([]byte, cipher.AEAD, error) {
	period := seal.PeriodOf(k.now())
	// The key's row is locked FOR SHARE (see currentSQL); when a destroy
	// went first, a new key is made.
	var id, sealed []byte
	err := q.QueryRow(ctx, currentSQL, scope, period).Scan(&id, &sealed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, err
	}
	if err == nil {
		a, err := k.opened.Cipher(k.masters, id, func() ([]byte, error) { return sealed, nil })
		if err != nil {
			return nil, nil, err
		}
		return id, a, nil
	}
	return k.make(ctx, q, scope, false)
}

// make makes scope's key of this period and makes it current. With
// later, its rows are queued on pipe q, sent with the transaction's
// next round trip.
func (k *keyring) make(ctx context.Context, q querier, scope string, later bool) ([]byte, cipher.AEAD, error) {
	period := seal.PeriodOf(k.now())
	id, key, err := seal.NewKey()
	if err != nil {
		return nil, nil, err
	}
	const insertKey = `INSERT INTO data_keys (id, period, scope, sealed) VALUES ($1, $2, $3, $4)`
	const makeCurrent = `INSERT INTO current_keys (scope, id, period) VALUES ($1, $2, $3)
		ON CONFLICT (scope) DO UPDATE SET id = excluded.id, period = excluded.period`
	sealed := seal.SealKey(k.masters[0], id, key)
	if p, ok := q.(*pipe); ok && later {
		p.later(insertKey, id, period, scope, sealed)
		p.later(makeCurrent, scope, id, period)
	} else {
		if _, err := q.Exec(ctx, insertKey, id, period, scope, sealed); err != nil {
			return nil, nil, err
		}
		if _, err := q.Exec(ctx, makeCurrent, scope, id, period); err != nil {
			return nil, nil, err
		}
	}
	a, err := seal.NewAEAD(key)
	if err != nil {
		return nil, nil, err
	}
	k.opened.Put(id, a)
	return id, a, nil
}

// seal encrypts plain with scope's current key; it returns the value
// and the key's id.
func (k *keyring) seal(ctx context.Context, q querier, scope string, plain []byte) (sealed, id []byte, err error) {
	all, id, err := k.sealEach(ctx, q, scope, plain)
	if err != nil {
		return nil, nil, err
	}
	return all[0], id, nil
}

// sealEach seals each of plains with scope's current key, read (and
// locked) once for them all.
func (k *keyring) sealEach(ctx context.Context, q querier, scope string, plains ...[]byte) (sealed [][]byte, id []byte, err error) {
	scope = scopeOf(scope)
	id, a, err := k.current(ctx, q, scope)
	if err != nil {
		return nil, nil, fmt.Errorf("seal: %w", err)
	}
	for _, p := range plains {
		sealed = append(sealed, seal.Seal(id, a, p))
	}
	return sealed, id, nil
}

// open returns the plaintext of a stored value (raw itself when plain).
func (k *keyring) open(ctx context.Context, q querier, raw []byte) ([]byte, error) {
	id := seal.KeyID(raw)
	if id == nil {
		return raw, nil
	}
	a, err := k.aead(ctx, q, id)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return seal.Open(nil, a, raw)
}

// destroy deletes data keys: every value they sealed becomes unreadable.
func (k *keyring) destroy(ctx context.Context, q querier, ids [][]byte) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, `DELETE FROM current_keys WHERE id = ANY($1)`, ids); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `DELETE FROM data_keys WHERE id = ANY($1)`, ids); err != nil {
		return err
	}
	for _, id := range ids {
		k.opened.Forget(id)
	}
	k.forgetSealing(ids)
	return nil
}

// lockKeys locks FOR UPDATE the data keys where (a condition on
// data_keys with arg as $1) selects, and returns the ids of those still
// there. Every destroy locks its keys so, before it reads what they seal:
// a transaction sealing with one of them (current locks it FOR SHARE)
// commits first, and its values are then found and sealed again or
// deleted, never left sealed with a destroyed key.
func lockKeys(ctx context.Context, q querier, where string, arg any) ([][]byte, error) {
	rows, err := q.Query(ctx, `SELECT id FROM data_keys WHERE `+where+` ORDER BY id FOR UPDATE`, arg)
	if err != nil {
		return nil, fmt.Errorf("lock data keys: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("lock data keys: %w", err)
	}
	return ids, nil
}

// setUp finds the master keys: derived from secrets, else the one kept
// in meta, generated when create is set and there is none. A data key
// sealed with another master than the current one is sealed again with
// it (a rotation of TIDYBOT_SECRET_KEY, or one set after the generated
// key was used, which is then deleted).
func (k *keyring) setUp(ctx context.Context, tx pgx.Tx, secrets [][]byte, create bool) error {
	// One statement, so one moment: read apart, the master key could be
	// read before another replica kept its own, and the data keys after
	// it sealed some with it.
	var generated []byte
	var ids, sealed [][]byte
	err := tx.QueryRow(ctx, `SELECT (SELECT value FROM meta WHERE key = $1),
		coalesce(array_agg(id ORDER BY id), '{}'), coalesce(array_agg(sealed ORDER BY id), '{}') FROM data_keys`, metaMaster).Scan(&generated, &ids, &sealed)
	if err != nil {
		return fmt.Errorf("store: master and data keys: %w", err)
	}
	masters, err := seal.Masters(secrets, generated, "the database")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	k.masters = append(k.masters, masters...)
	type rec struct{ ID, Sealed []byte }
	recs := make([]rec, len(ids))
	for i := range ids {
		recs[i] = rec{ids[i], sealed[i]}
	}
	if len(k.masters) == 0 {
		if len(recs) > 0 {
			return errors.New("store: the data keys are sealed with TIDYBOT_SECRET_KEY, which is not set")
		}
		if !create {
			return nil
		}
		return k.generate(ctx, tx)
	}
	var reseal []rec
	failed := 0
	for _, r := range recs {
		again, ok := seal.Reseal(k.masters, r.ID, r.Sealed)
		if !ok {
			failed++
			continue
		}
		if again != nil {
			reseal = append(reseal, rec{r.ID, again})
		}
	}
	if failed > 0 {
		return fmt.Errorf("store: %w", seal.Unopened(failed, len(recs)))
	}
	if !create {
		return nil
	}
	for _, r := range reseal {
		if _, err := tx.Exec(ctx, `UPDATE data_keys SET sealed = $2 WHERE id = $1`, r.ID, r.Sealed); err != nil {
			return fmt.Errorf("store: seal data keys again: %w", err)
		}
	}
	if generated != nil && len(secrets) > 0 {
		k.masters = k.masters[:len(k.masters)-1]
		if _, err := tx.Exec(ctx, `DELETE FROM meta WHERE key = $1`, metaMaster); err != nil {
			return fmt.Errorf("store: delete the generated master key: %w", err)
		}
	}
	return nil
}

// generate makes the master key kept in the database when no
// TIDYBOT_SECRET_KEY is given.
func (k *keyring) generate(ctx context.Context, tx pgx.Tx) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("store: generate the data master key: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, metaMaster, key); err != nil {
		return fmt.Errorf("store: keep the data master key: %w", err)
	}
	// Another process may have kept its key first: use the one kept.
	if err := tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, metaMaster).Scan(&key); err != nil {
		return fmt.Errorf("store: master key: %w", err)
	}
	a, err := seal.NewAEAD(key)
	if err != nil {
		return err
	}
	k.masters = append(k.masters, a)
	return nil
}

// rewrapEvery is how often a store given more than one master key (a
// rotation: TIDYBOT_SECRET_KEY=new,old) seals again with the first the
// data keys another replica sealed with an older one since: replicas of
// a rolling update run with both orders for a while.
const rewrapEvery = 10 * time.Minute

// rewrap seals again with the first master key every data key sealed
// with another, and returns how many it sealed again and how many no
// configured master opens (written by a replica with another key).
// Each key changes on its own, only if unchanged since read.
func (k *keyring) rewrap(ctx context.Context, q querier) (resealed, unopened int, err error) {
	if len(k.masters) < 2 {
		return 0, 0, nil // one master opens every key, or none could be opened
	}
	rows, err := q.Query(ctx, `SELECT id, sealed FROM data_keys`)
	if err != nil {
		return 0, 0, fmt.Errorf("store: data keys: %w", err)
	}
	type rec struct{ ID, Sealed []byte }
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
	if err != nil {
		return 0, 0, fmt.Errorf("store: data keys: %w", err)
	}
	for _, r := range recs {
		again, ok := seal.Reseal(k.masters, r.ID, r.Sealed)
		switch {
		case !ok:
			unopened++
		case again != nil:
			tag, err := q.Exec(ctx, `UPDATE data_keys SET sealed = $2 WHERE id = $1 AND sealed = $3`, r.ID, again, r.Sealed)
			if err != nil {
				return resealed, unopened, fmt.Errorf("store: seal data keys again: %w", err)
			}
			resealed += int(tag.RowsAffected())
		}
	}
	return resealed, unopened, nil
}

// rewrapLoop runs rewrap every rewrapEvery until stop is closed.
func (s *Store) rewrapLoop(every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		n, bad, err := s.keys.rewrap(ctx, s.pool)
		cancel()
		switch {
		case err != nil:
			s.log.Error("sealing data keys again with the current TIDYBOT_SECRET_KEY", slog.Any("err", err))
		case bad > 0:
			s.log.Error("data keys open with no configured TIDYBOT_SECRET_KEY: a replica runs with another key", slog.Int("data_keys", bad))
		case n > 0:
			s.log.Info("data keys sealed again with the current TIDYBOT_SECRET_KEY", slog.Int("data_keys", n))
		}
	}
}
