package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// transactionPooler pretends to be a pooler in transaction mode: each
// statement runs on the next of its server connections in turn, as
// PgBouncer's pool_mode = transaction may do.
type transactionPooler struct {
	conns []*pgx.Conn
	next  int
}

func (p *transactionPooler) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c := p.conns[p.next%len(p.conns)]
	p.next++
	return c.QueryRow(ctx, sql, args...)
}

// TestTransactionPoolerIsDetected: through one connection the advisory
// lock a statement takes is seen by the next; through a transaction
// pooler, it is not, and Open's check refuses it with a message that
// names the fix.
func TestTransactionPoolerIsDetected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	var conns []*pgx.Conn
	for range 2 {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(ctx) })
		conns = append(conns, c)
	}
	if ok, err := pooledBySession(ctx, conns[0]); !ok || err != nil {
		t.Errorf("a direct connection: pooled by session %v, %v; want true", ok, err)
	}
	var held int
	if err := conns[1].QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, conns[0].PgConn().PID()).Scan(&held); err != nil || held != 0 {
		t.Errorf("advisory locks left by the check: %d, %v", held, err)
	}
	if ok, err := pooledBySession(ctx, &transactionPooler{conns: conns}); ok || err != nil {
		t.Errorf("a transaction pooler: pooled by session %v, %v; want false", ok, err)
	}
	if msg := errTransactionPooler.Error(); !strings.Contains(msg, "session pooling") || !strings.Contains(msg, "docs/deploy.md") {
		t.Errorf("the refusal does not say what to do: %q", msg)
	}
}
