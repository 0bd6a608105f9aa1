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

func (s settings) SettingOrSet(_ context.Context, k, v string) (string, error) {
	if kept, ok := s[k]; ok {
		return kept, nil
	}
	s[k] = v
	return v, nil
}

// beaten is a KeyStore where another replica keeps its key between
// LinkKey's read and its write.
type beaten struct {
	settings
	other string
}

func (b beaten) Setting(ctx context.Context, k string) (string, error) {
	if _, err := b.settings.Setting(ctx, k); err != nil {
		b.settings[k] = b.other // kept meanwhile
		return "", err
	}
	return b.settings.Setting(ctx, k)
}

// TestLinkKeyIsTheOneKeptFirst: a replica that finds no key and
// generates one signs with the key another replica kept first, or the
// links one signs would be refused by the other.
func TestLinkKeyIsTheOneKeptFirst(t *testing.T) {
	other := settings{}
	want, err := LinkKey(t.Context(), nil, other, true)
	if err != nil {
		t.Fatal(err)
	}
	st := beaten{settings: settings{}, other: other[settingLinkKey]}
	got, err := LinkKey(t.Context(), nil, st, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the link key is the one this replica generated, not the one kept first")
	}
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
