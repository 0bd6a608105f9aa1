// Package seal is the encryption both stores share: values sealed
// (AES-256-GCM) with data keys, and data keys sealed with a master key
// derived from TIDYBOT_SECRET_KEY (or generated and kept in the
// database). Where the keys are kept, and when they are destroyed, is
// each store's business; the formats here are one for both, so that a
// value reads the same wherever it is kept.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
)

// KeyPeriod is how long a scope's data key seals its new values: each
// period gets a new key, so that retention can destroy the keys of the
// periods it has passed.
const KeyPeriod = 24 * time.Hour

// PeriodOf is the period (unix seconds of its start) t falls in.
func PeriodOf(t time.Time) int64 { return t.Truncate(KeyPeriod).Unix() }

// KeyIDLen is the length of a data key's id.
const KeyIDLen = 16

// Magic starts every sealed value. No plaintext value does: an
// envelope, a transcript and a snapshot are JSON, which starts with '{'.
var Magic = []byte{0xff, 't', 'b', 's'}

// ErrNoKeys is returned for a sealed value when no master key is known
// (a read-only open of a database whose generated master key is missing).
var ErrNoKeys = errors.New("the data is encrypted and no key to open it is known: set TIDYBOT_SECRET_KEY, or start tidybot serve or chat on the database once")

// ErrKeyGone is a sealed value whose data key was destroyed.
var ErrKeyGone = errors.New("the data key of this value was destroyed")

// NewAEAD returns AES-256-GCM with key.
func NewAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// masterFrom derives the master key from a TIDYBOT_SECRET_KEY key, apart
// from the keys cmd/tidybot derives from it for tokens and signatures.
func masterFrom(secret []byte) (cipher.AEAD, error) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("tidybot data keys v1"))
	return NewAEAD(m.Sum(nil))
}

// Masters returns the master keys: derived from each of secrets (the
// current one first), then generated (the key kept in the database when
// no TIDYBOT_SECRET_KEY was given) when not nil; where names the
// database in an error.
func Masters(secrets [][]byte, generated []byte, where string) ([]cipher.AEAD, error) {
	var out []cipher.AEAD
	for _, s := range secrets {
		a, err := masterFrom(s)
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		out = append(out, a)
	}
	if generated != nil {
		a, err := NewAEAD(generated)
		if err != nil {
			return nil, fmt.Errorf("the data master key kept in %s is damaged: %w", where, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Reseal opens sealed data key id with any of masters: again is the key
// sealed with the current master when another sealed it (nil when the
// current one did); ok is false when none opens it.
func Reseal(masters []cipher.AEAD, id, sealed []byte) (again []byte, ok bool) {
	key, current, err := openKey(masters, id, sealed)
	if err != nil {
		return nil, false
	}
	if !current {
		again = SealKey(masters[0], id, key)
	}
	return again, true
}

// Unopened is the error for failed of n data keys that open with none
// of the master keys.
func Unopened(failed, n int) error {
	return fmt.Errorf("%d of %d data keys do not open with TIDYBOT_SECRET_KEY (was it changed without keeping the old key? list the new key, a comma, then the old one)", failed, n)
}

// NewKey returns a new data key and its random id.
func NewKey() (id, key []byte, err error) {
	id, key = make([]byte, KeyIDLen), make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return nil, nil, fmt.Errorf("new data key: %w", err)
	}
	if _, err := rand.Read(key); err != nil {
		return nil, nil, fmt.Errorf("new data key: %w", err)
	}
	return id, key, nil
}

// SealKey seals data key id with master, nonce first, its id the
// additional data.
func SealKey(master cipher.AEAD, id, key []byte) []byte {
	nonce := make([]byte, master.NonceSize(), master.NonceSize()+len(key)+master.Overhead())
	_, _ = rand.Read(nonce)
	return master.Seal(nonce, nonce, key, id)
}

// openKey opens a sealed data key with any of masters; current reports
// whether the first (the current one) sealed it.
func openKey(masters []cipher.AEAD, id, sealed []byte) (key []byte, current bool, err error) {
	for i, a := range masters {
		if len(sealed) < a.NonceSize() {
			break
		}
		if key, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], id); err == nil {
			return key, i == 0, nil
		}
	}
	return nil, false, errors.New("a data key does not open with the master key")
}

// Seal encrypts plain with data key id's cipher a: magic, id, nonce,
// then the ciphertext, whose additional data is magic and id.
func Seal(id []byte, a cipher.AEAD, plain []byte) []byte {
	head := len(Magic) + KeyIDLen
	out := make([]byte, head+a.NonceSize(), head+a.NonceSize()+len(plain)+a.Overhead())
	copy(out, Magic)
	copy(out[len(Magic):], id)
	_, _ = rand.Read(out[head:])
	return a.Seal(out, out[head:], plain, out[:head])
}

// KeyID returns the id of the key that sealed raw, or nil for a
// plaintext value.
func KeyID(raw []byte) []byte {
	if !bytes.HasPrefix(raw, Magic) || len(raw) < len(Magic)+KeyIDLen {
		return nil
	}
	return raw[len(Magic) : len(Magic)+KeyIDLen]
}

// Open appends the plaintext of raw, sealed with a (the cipher of
// KeyID(raw)), to dst.
func Open(dst []byte, a cipher.AEAD, raw []byte) ([]byte, error) {
	head := len(Magic) + KeyIDLen
	if len(raw) < head+a.NonceSize() {
		return nil, errors.New("open: sealed value too short")
	}
	pt, err := a.Open(dst, raw[head:head+a.NonceSize()], raw[head+a.NonceSize():], raw[:head])
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return pt, nil
}

// maxOpened bounds the ciphers a Cache keeps (an AES-GCM cipher is 784
// bytes: about 7 MiB when full): a store of 100,000 conversations would
// otherwise keep 100,000 of them. Each conversation seals with a key of
// its own, so the bound is the conversations active at once that keep
// their keys opened: with 1,024, 2,000 people writing at once cost
// PostgreSQL 0.82 more round trips a message (a key read again,
// `SELECT sealed FROM data_keys`, BenchmarkServe with -serve-people
// 2000), as one missing on bbolt costs a read of the file.
const maxOpened = 8192

// Cache keeps the ciphers of data keys opened. An id names one key for
// ever (ids are random and never reused), so a cached cipher is never
// stale, even if the transaction that made it rolls back. Its zero
// value is ready; it is safe for concurrent use.
type Cache struct {
	mu     sync.Mutex
	opened map[string]cipher.AEAD
}

// get returns id's cipher if kept.
func (c *Cache) get(id []byte) (cipher.AEAD, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.opened[string(id)]
	return a, ok
}

// Put keeps id's cipher.
func (c *Cache) Put(id []byte, a cipher.AEAD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opened == nil {
		c.opened = map[string]cipher.AEAD{}
	}
	if len(c.opened) >= maxOpened {
		for old := range c.opened { // any one: map order is random
			delete(c.opened, old)
			break
		}
	}
	c.opened[string(id)] = a
}

// Cipher returns data key id's cipher: the one kept, else the key load
// reads (sealed with one of masters), opened and kept.
func (c *Cache) Cipher(masters []cipher.AEAD, id []byte, load func() (sealed []byte, err error)) (cipher.AEAD, error) {
	if len(masters) == 0 {
		return nil, ErrNoKeys
	}
	if a, ok := c.get(id); ok {
		return a, nil
	}
	sealed, err := load()
	if err != nil {
		return nil, err
	}
	key, _, err := openKey(masters, id, sealed)
	if err != nil {
		return nil, err
	}
	a, err := NewAEAD(key)
	if err != nil {
		return nil, err
	}
	c.Put(id, a)
	return a, nil
}

// Forget drops id's cipher (a destroyed key).
func (c *Cache) Forget(id []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.opened, string(id))
}
