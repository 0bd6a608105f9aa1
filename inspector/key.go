package inspector

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/tidybot/tidybot/bot"
)

// settingLinkKey is the setting that keeps the generated key when there
// is no secret.
const settingLinkKey = "run_link_key"

// KeyStore is where a generated link key is kept (the store's settings).
type KeyStore interface {
	// Setting returns bot.ErrNotFound for a key never set.
	Setting(ctx context.Context, key string) (string, error)
	// SettingOrSet returns the setting kept under key, keeping value
	// there first when there is none, in one step: of callers at once,
	// in this process or in replicas sharing the database, each gets
	// the value kept first. It refuses a pending request
	// (bot.PendingPrefix) and an empty value.
	SettingOrSet(ctx context.Context, key, value string) (string, error)
}

// ErrNoLinkKey is a link key asked for without create before one was
// generated (a read-only database).
var ErrNoLinkKey = errors.New("no run link key yet: start tidybot serve once, or set TIDYBOT_SECRET_KEY")

// ErrDamagedLinkKey is a kept link key that is not 32 bytes of base64.
var ErrDamagedLinkKey = errors.New("the run link key kept in the database is damaged: set TIDYBOT_SECRET_KEY")

// LinkKey returns the key that signs run links (NewSigner's): derived
// from secret (TIDYBOT_SECRET_KEY's current key) when set, so the same
// secret can serve other purposes without the link key revealing it;
// else from a random key generated at first start and kept in st, so
// links outlive a restart and every replica sharing st signs with the
// same key (the one kept first). Without create, a key not yet generated is
// ErrNoLinkKey.
func LinkKey(ctx context.Context, secret []byte, st KeyStore, create bool) ([]byte, error) {
	base := secret
	if len(base) == 0 {
		v, err := st.Setting(ctx, settingLinkKey)
		switch {
		case err == nil:
		case errors.Is(err, bot.ErrNotFound) && !create:
			return nil, ErrNoLinkKey
		case errors.Is(err, bot.ErrNotFound):
			fresh := make([]byte, 32)
			if _, err := rand.Read(fresh); err != nil {
				return nil, fmt.Errorf("generate the run link key: %w", err)
			}
			// Replicas starting together each generate one: all
			// use the one kept first.
			if v, err = st.SettingOrSet(ctx, settingLinkKey, base64.StdEncoding.EncodeToString(fresh)); err != nil {
				return nil, fmt.Errorf("keep the run link key: %w", err)
			}
		default:
			return nil, fmt.Errorf("read the run link key: %w", err)
		}
		if base, err = base64.StdEncoding.DecodeString(v); err != nil || len(base) != 32 {
			return nil, ErrDamagedLinkKey
		}
	}
	m := hmac.New(sha256.New, base)
	m.Write([]byte("tidybot run links v1"))
	return m.Sum(nil), nil
}
