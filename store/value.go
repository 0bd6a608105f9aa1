package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/tidybot/tidybot/bot"
)

// envelope is how every value is stored: versioned JSON.
type envelope struct {
	V    int             `json:"v"`
	Data json.RawMessage `json:"data"`
}

func encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return envelop(data), nil
}

// envelopeStart is how json.Marshal writes an envelope up to its data.
var envelopeStart = `{"v":` + strconv.Itoa(valueVersion) + `,"data":`

// envelop wraps data, as json.Marshal wrote it, in an envelope with the
// bytes json.Marshal(envelope{…}) would write, without its cost:
// Marshal validates and compacts a RawMessage again, byte by byte.
func envelop(data []byte) []byte {
	out := make([]byte, 0, len(envelopeStart)+len(data)+1)
	out = append(out, envelopeStart...)
	out = append(out, data...)
	return append(out, '}')
}

func decode(raw []byte, v any) error {
	// A value as envelop wrote it (all of them) decodes in one pass, not
	// one for the envelope and one for its data. Anything else, such as
	// another version, goes through the envelope.
	if data, ok := bytes.CutPrefix(raw, []byte(envelopeStart)); ok && bytes.HasSuffix(data, []byte("}")) {
		err := json.Unmarshal(data[:len(data)-1], v)
		if err == nil {
			return nil
		}
		// A syntax error (a layout envelop did not write) has changed
		// nothing in v: json checks the whole input first.
		if syntax := (*json.SyntaxError)(nil); !errors.As(err, &syntax) {
			return fmt.Errorf("decode value: %w", err)
		}
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("decode value: %w", err)
	}
	if env.V != valueVersion {
		return fmt.Errorf("value version %d, want %d", env.V, valueVersion)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("decode value: %w", err)
	}
	return nil
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func put(b *bolt.Bucket, key []byte, v any) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// putSealed stores v under key in b, sealed with scope's data key.
func (s *Store) putSealed(tx *bolt.Tx, b *bolt.Bucket, key []byte, scope string, v any) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	if raw, err = s.keys.seal(tx, scope, raw); err != nil {
		return err
	}
	return b.Put(key, raw)
}

// decodeSealed decodes a stored value, sealed or (written before values
// were sealed) not.
func (s *Store) decodeSealed(tx *bolt.Tx, raw []byte, v any) error {
	if sealedKeyID(raw) == nil {
		return decode(raw, v)
	}
	// The plaintext is needed only while it is decoded (json copies
	// what it keeps): lists of thousands of runs reuse one buffer.
	bp := plainBufs.Get().(*[]byte)
	defer plainBufs.Put(bp)
	pt, err := s.keys.openTo((*bp)[:0], tx, raw)
	if err != nil {
		return err
	}
	*bp = pt[:0]
	return decode(pt, v)
}

var plainBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// Scopes of data keys (see seal.go) besides conversations, which are
// scoped by their thread key.
const (
	scopeOutbox   = "outbox"
	scopeSnapshot = "snapshot:"       // + account key
	scopePending  = bot.PendingPrefix // each pending request is a scope of its own
)

func keys(b *bolt.Bucket) [][]byte {
	var out [][]byte
	if b != nil {
		_ = b.ForEach(func(k, _ []byte) error { out = append(out, bytes.Clone(k)); return nil })
	}
	return out
}
