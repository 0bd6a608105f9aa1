package store

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/store/seal"
)

// Deleted means unreadable. bbolt frees the pages of a deleted value
// without wiping them, so the text of a message deleted by /reset or by
// retention stays in the file until the page is reused. Every value that
// holds what people wrote, or what the agent read of their Todoist, is
// therefore sealed (AES-256-GCM) with a data key of its scope (a
// conversation, a Todoist account, a pending request), and deleting the
// data deletes the key: what stays on free pages cannot be opened
// (crypto-shredding).
//
// A scope gets a new data key each keyPeriod, so that retention can
// destroy the keys of periods it has passed: a value it deleted becomes
// unreadable at the latest keyPeriod after it was deleted. Data keys are
// kept in bucketDataKeys, each sealed with the master key: derived from
// TIDYBOT_SECRET_KEY (WithSecretKeys), or, when it is unset, generated at
// first start and kept in the file (keyMaster), as the run link key is.
// A data key that was destroyed also lies on a free page, sealed with the
// master key: with the master key kept in the file, someone who has the
// file and searches its free pages could still open it; with
// TIDYBOT_SECRET_KEY kept apart from the file, they cannot.

var (
	// bucketDataKeys: key id → dataKey record (period, scope, the key
	// sealed with the master key).
	bucketDataKeys = []byte("data_keys")
	// bucketScopeKeys: scope, 0, key id → nil: every data key of a
	// scope, so that its keys are found to destroy. (Flat, not a bucket
	// per scope: one per conversation would cost a page each once
	// they grow.)
	bucketScopeKeys = []byte("scope_keys")
	// bucketCurrentKeys: scope → the id and period of the key that
	// seals the scope's new values.
	bucketCurrentKeys = []byte("current_keys")
	// keyMaster (in bucketMeta) is the master key generated when no
	// TIDYBOT_SECRET_KEY is given.
	keyMaster = []byte("data_master_key")
)

// The formats are package seal's, shared with the other stores.
var sealedMagic = seal.Magic

const (
	keyIDLen  = seal.KeyIDLen
	keyPeriod = seal.KeyPeriod
)

var (
	errNoKeys  = seal.ErrNoKeys
	errKeyGone = seal.ErrKeyGone
	periodOf   = seal.PeriodOf
	newAEAD    = seal.NewAEAD
)

// scopeNone is the scope of a value that names none (a journal entry
// without its thread): retention destroys its keys.
const scopeNone = "-"

// keyring seals and opens values with data keys.
type keyring struct {
	// masters seal data keys (the first) and open them (any: a key
	// rotation lists the new key first).
	masters []cipher.AEAD
	now     func() time.Time
	opened  seal.Cache
}

// dataKey is a data key's record: period (8 bytes, big-endian unix
// seconds), scope length (2), scope, then the key sealed with the master
// key, nonce first, its id the additional data.
type dataKey struct {
	period int64
	scope  string
	sealed []byte
}

func (d dataKey) marshal() []byte {
	out := make([]byte, 10, 10+len(d.scope)+len(d.sealed))
	binary.BigEndian.PutUint64(out, uint64(d.period))
	binary.BigEndian.PutUint16(out[8:], uint16(len(d.scope)))
	out = append(out, d.scope...)
	return append(out, d.sealed...)
}

func parseDataKey(raw []byte) (dataKey, error) {
	if len(raw) < 10 {
		return dataKey{}, errors.New("data key record too short")
	}
	n := int(binary.BigEndian.Uint16(raw[8:]))
	if len(raw) < 10+n {
		return dataKey{}, errors.New("data key record too short")
	}
	return dataKey{period: int64(binary.BigEndian.Uint64(raw)), scope: string(raw[10 : 10+n]), sealed: raw[10+n:]}, nil
}

// sealKey seals a data key with the current master key.
func (k *keyring) sealKey(id, key []byte) []byte { return seal.SealKey(k.masters[0], id, key) }

// aead returns data key id's cipher, opening it from tx once.
func (k *keyring) aead(tx *bolt.Tx, id []byte) (cipher.AEAD, error) {
	return k.opened.Cipher(k.masters, id, func() ([]byte, error) {
		raw := tx.Bucket(bucketDataKeys).Get(id)
		if raw == nil {
			return nil, errKeyGone
		}
		d, err := parseDataKey(raw)
		return d.sealed, err
	})
}

// current returns the id and cipher of the key that seals scope's new
// values now, making one when the scope has none for this period.
func (k *keyring) current(tx *bolt.Tx, scope string) ([]byte, cipher.AEAD, error) {
	if len(k.masters) == 0 {
		return nil, nil, errNoKeys
	}
	if scope == "" {
		scope = scopeNone
	}
	period := periodOf(k.now())
	cur := tx.Bucket(bucketCurrentKeys)
	if v := cur.Get([]byte(scope)); len(v) == keyIDLen+8 && int64(binary.BigEndian.Uint64(v[keyIDLen:])) == period {
		id := bytes.Clone(v[:keyIDLen])
		a, err := k.aead(tx, id)
		if err == nil {
			return id, a, nil
		}
		if !errors.Is(err, errKeyGone) {
			return nil, nil, err
		}
	}
	id, key, err := seal.NewKey()
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Bucket(bucketDataKeys).Put(id, dataKey{period: period, scope: scope, sealed: k.sealKey(id, key)}.marshal()); err != nil {
		return nil, nil, err
	}
	if err := tx.Bucket(bucketScopeKeys).Put(scopeKey(scope, id), nil); err != nil {
		return nil, nil, err
	}
	if err := cur.Put([]byte(scope), append(bytes.Clone(id), u64(uint64(period))...)); err != nil {
		return nil, nil, err
	}
	a, err := newAEAD(key)
	if err != nil {
		return nil, nil, err
	}
	k.opened.Put(id, a)
	return id, a, nil
}

// seal encrypts plain with scope's current key.
func (k *keyring) seal(tx *bolt.Tx, scope string, plain []byte) ([]byte, error) {
	id, a, err := k.current(tx, scope)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return seal.Seal(id, a, plain), nil
}

// sealedKeyID returns the id of the key that sealed raw, or nil for a
// plaintext value.
func sealedKeyID(raw []byte) []byte { return seal.KeyID(raw) }

// open returns the plaintext of a stored value: raw itself when it is
// not sealed (a file written before values were sealed).
func (k *keyring) open(tx *bolt.Tx, raw []byte) ([]byte, error) {
	return k.openTo(nil, tx, raw)
}

// openTo is open appending the plaintext of a sealed value to dst.
func (k *keyring) openTo(dst []byte, tx *bolt.Tx, raw []byte) ([]byte, error) {
	id := sealedKeyID(raw)
	if id == nil {
		return raw, nil
	}
	a, err := k.aead(tx, id)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return seal.Open(dst, a, raw)
}

// scopeKeys returns the ids of every data key of scope.
func scopeKeys(tx *bolt.Tx, scope string) [][]byte {
	var out [][]byte
	prefix := scopeKey(scope, nil)
	c := tx.Bucket(bucketScopeKeys).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if id := k[len(prefix):]; len(id) == keyIDLen {
			out = append(out, bytes.Clone(id))
		}
	}
	return out
}

// scopeKey is the key of data key id in bucketScopeKeys. Scopes (thread
// keys, account keys, setting keys) hold no 0 byte.
func scopeKey(scope string, id []byte) []byte {
	out := make([]byte, 0, len(scope)+1+len(id))
	out = append(append(out, scope...), 0)
	return append(out, id...)
}

// retire makes scope's next value take a new key, so that its keys so
// far can be destroyed once the values they sealed are gone or sealed
// again. It returns those keys.
func retire(tx *bolt.Tx, scope string) ([][]byte, error) {
	if scope == "" {
		scope = scopeNone
	}
	ids := scopeKeys(tx, scope)
	return ids, tx.Bucket(bucketCurrentKeys).Delete([]byte(scope))
}

// destroy deletes data keys: every value they sealed becomes unreadable.
func (k *keyring) destroy(tx *bolt.Tx, ids [][]byte) error {
	dk, cur := tx.Bucket(bucketDataKeys), tx.Bucket(bucketCurrentKeys)
	for _, id := range ids {
		raw := dk.Get(id)
		if raw == nil {
			continue
		}
		d, err := parseDataKey(raw)
		if err != nil {
			return err
		}
		if err := dk.Delete(id); err != nil {
			return err
		}
		if err := tx.Bucket(bucketScopeKeys).Delete(scopeKey(d.scope, id)); err != nil {
			return err
		}
		if v := cur.Get([]byte(d.scope)); len(v) >= keyIDLen && bytes.Equal(v[:keyIDLen], id) {
			if err := cur.Delete([]byte(d.scope)); err != nil {
				return err
			}
		}
		k.opened.Forget(id)
	}
	return nil
}

// destroyScope destroys every key of scope (whose values are all gone).
func (k *keyring) destroyScope(tx *bolt.Tx, scope string) error {
	return k.destroy(tx, scopeKeys(tx, scope))
}

// setUp finds the master keys: derived from secrets, else the one kept
// in the file, generated when create is set and there is none. A key
// sealed with another master than the current one is sealed again with
// it (a rotation of TIDYBOT_SECRET_KEY, or a TIDYBOT_SECRET_KEY set after
// the generated key was used, which is then deleted).
func (k *keyring) setUp(tx *bolt.Tx, secrets [][]byte, create bool) error {
	meta := tx.Bucket(bucketMeta)
	generated := meta.Get(keyMaster)
	masters, err := seal.Masters(secrets, generated, "the file")
	if err != nil {
		return err
	}
	k.masters = append(k.masters, masters...)
	dk := tx.Bucket(bucketDataKeys)
	if len(k.masters) == 0 && dk.Stats().KeyN > 0 {
		return errors.New("the data keys are sealed with TIDYBOT_SECRET_KEY, which is not set")
	}
	if len(k.masters) == 0 {
		if !create {
			return nil // plaintext reads only; sealed ones fail with errNoKeys
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("generate the data master key: %w", err)
		}
		if err := meta.Put(keyMaster, key); err != nil {
			return err
		}
		a, err := newAEAD(key)
		if err != nil {
			return err
		}
		k.masters = append(k.masters, a)
		return nil
	}
	var reseal [][2][]byte
	opened := 0
	err = dk.ForEach(func(id, raw []byte) error {
		d, err := parseDataKey(raw)
		if err != nil {
			return err
		}
		again, ok := seal.Reseal(k.masters, id, d.sealed)
		if !ok {
			return nil // counted below
		}
		opened++
		if again != nil {
			d.sealed = again
			reseal = append(reseal, [2][]byte{bytes.Clone(id), d.marshal()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := dk.Stats().KeyN; opened < n {
		return seal.Unopened(n-opened, n)
	}
	if !create {
		return nil
	}
	for _, r := range reseal {
		if err := dk.Put(r[0], r[1]); err != nil {
			return err
		}
	}
	if generated != nil && len(secrets) > 0 {
		// Every key is now sealed with TIDYBOT_SECRET_KEY: the
		// generated master key is not needed any more.
		k.masters = k.masters[:len(k.masters)-1]
		return meta.Delete(keyMaster)
	}
	return nil
}
