package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/seal"
)

// TestRotationWithReplicas: a rolling rotation of TIDYBOT_SECRET_KEY as
// deploy.md tells it. Before issue 35 data keys were sealed again only at
// Open: a replica still sealing with the old key went on making keys the
// new one had not sealed, and the start with the new key alone refused
// the database. Now: (1) every replica gets old,new (the old still
// seals, the new opens); (2) they get new,old one by one, and a replica
// of either order reads what the other wrote; (3) once none seals with
// the old key, the ones with new,old seal again in the background what
// the old-first ones made; (4) new alone opens the database.
func TestRotationWithReplicas(t *testing.T) {
	ctx := context.Background()
	oldK, newK := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	first, u := openTest(t, WithSecretKeys([][]byte{oldK}))
	if err := first.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:1:", Text: "before", At: t0}}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	// (1) and (2): A of step 1 still runs while B of step 2 starts.
	a, err := Open(ctx, u, WithSecretKeys([][]byte{oldK, newK}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, u, WithSecretKeys([][]byte{newK, oldK}), withRewrapEvery(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:2:", Text: "by the new pod", At: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, bot.Change{Message: &bot.Message{ThreadKey: "telegram:3:", Text: "by the old pod", At: t0}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s   *Store
		key string
	}{{a, "telegram:2:"}, {b, "telegram:3:"}, {a, "telegram:1:"}, {b, "telegram:1:"}} {
		if msgs, err := c.s.RecentMessages(ctx, c.key, time.Time{}, 5); err != nil || len(msgs) != 1 {
			t.Errorf("a replica reads %s, which the other wrote: %v, %v", c.key, msgs, err)
		}
	}
	a.Close() // (3): the last old-first replica ends; B's background pass seals its keys again
	newOnly, err := seal.Masters([][]byte{newK}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ids, sealed [][]byte
		if err := b.pool.QueryRow(ctx, `SELECT array_agg(id), array_agg(sealed) FROM data_keys`).Scan(&ids, &sealed); err != nil {
			t.Fatal(err)
		}
		left := 0
		for i := range ids {
			if again, ok := seal.Reseal(newOnly, ids[i], sealed[i]); !ok || again != nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d data keys not sealed with the new key 10 s after the last old-first replica ended", left, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Close()
	// (4) "once started with new,old, the old key is no longer needed".
	c, err := Open(ctx, u, WithSecretKeys([][]byte{newK}))
	if err != nil {
		t.Fatalf("start with the new key only after a rolling rotation: %v", err)
	}
	defer c.Close()
	for _, key := range []string{"telegram:1:", "telegram:2:", "telegram:3:"} {
		if msgs, err := c.RecentMessages(ctx, key, time.Time{}, 5); err != nil || len(msgs) != 1 {
			t.Errorf("%s with the new key alone: %v, %v", key, msgs, err)
		}
	}
}
