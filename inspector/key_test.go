package inspector

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tidybot/tidybot/bot"
)

// settings is a KeyStore in memory.
type settings map[string]string

func (s settings) Setting(_ context.Context, k string) (string, error) {
	v, ok := s[k]
	if !ok {
		return "", bot.ErrNotFound
	}
	return v, nil
}

func (s settings) SetSetting(_ context.Context, k, v string) error {
	s[k] = v
	return nil
}

func TestLinkKeyKeptInTheDatabaseOrDerivedFromTheSecret(t *testing.T) {
	st := settings{}
	if _, err := LinkKey(t.Context(), nil, st, false); !errors.Is(err, ErrNoLinkKey) {
		t.Errorf("before any key was made, read only: %v, want ErrNoLinkKey", err)
	}
	first, err := LinkKey(t.Context(), nil, st, true)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LinkKey(t.Context(), nil, st, false)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the generated key changed between starts (%v): links would break at every restart", err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	fromSecret, err := LinkKey(t.Context(), secret, st, true)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(fromSecret, first) || bytes.Contains(fromSecret, []byte("0123456789abcdef")) {
		t.Error("the secret is not used, or used as is")
	}
	st[settingLinkKey] = "c2hvcnQ="
	if _, err := LinkKey(t.Context(), nil, st, true); !errors.Is(err, ErrDamagedLinkKey) {
		t.Errorf("a short kept key: %v, want ErrDamagedLinkKey", err)
	}
}
