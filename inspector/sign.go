package inspector

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTTL is how long a run link works by default.
const DefaultTTL = 7 * 24 * time.Hour

// Signer makes and checks the signatures of run links: an HMAC-SHA256 of
// the run id and the expiry, so a link opens one run until it expires and
// cannot be altered to open another.
type Signer struct {
	key []byte
	now func() time.Time
}

// NewSigner returns a Signer with key (at least 32 bytes). now is the
// clock (nil: time.Now).
func NewSigner(key []byte, now func() time.Time) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("inspector: signing key must be at least 32 bytes")
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{key: append([]byte(nil), key...), now: now}, nil
}

func (s *Signer) mac(runID string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("tidybot run link\x00" + runID + "\x00" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// Sign returns the signature of a link to run runID that expires after
// ttl: "<unix expiry>.<base64url MAC>".
func (s *Signer) Sign(runID string, ttl time.Duration) string {
	exp := s.now().Add(ttl).Unix()
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(s.mac(runID, exp))
}

// Verify reports whether sig is a valid, unexpired signature for runID.
func (s *Signer) Verify(runID, sig string) bool {
	expText, macText, ok := strings.Cut(sig, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil {
		return false
	}
	if !hmac.Equal(got, s.mac(runID, exp)) {
		return false
	}
	return s.now().Unix() < exp
}

// Link returns the page address of run runID under base (the public
// address, e.g. https://bot.example.com), valid for ttl.
func (s *Signer) Link(base, runID string, ttl time.Duration) string {
	return strings.TrimRight(base, "/") + "/runs/" + url.PathEscape(runID) + "?sig=" + url.QueryEscape(s.Sign(runID, ttl))
}
