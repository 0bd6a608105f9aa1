// Package pgtest gives each test a PostgreSQL schema of its own, or skips
// the test, saying why, on a machine where no PostgreSQL answers. Set
// TIDYBOT_TEST_DATABASE_URL to use another server than the default.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// unreachable holds why the server did not answer, once it did not.
var unreachable atomic.Value

// defaultTestURL is the database the development and CI machines run.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the URL of a schema of its own for t (dropped at its
// end), or skips t, saying why, when no PostgreSQL answers.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TIDYBOT_TEST_DATABASE_URL")
	if base == "" {
		base = defaultTestURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if reason, ok := unreachable.Load().(string); ok {
		t.Skip(reason) // asked once: a server that does not answer costs the timeout once
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		reason := fmt.Sprintf("no PostgreSQL at TIDYBOT_TEST_DATABASE_URL (default %s): %v", defaultTestURL, err)
		unreachable.Store(reason)
		t.Skip(reason)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "tidybot_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = conn.Close(ctx)
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = conn.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
