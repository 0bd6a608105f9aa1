package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// onPostgres reports whether e runs on the PostgreSQL store
// (TIDYBOT_TEST_STORE=postgres) rather than the bbolt file.
func (e *env) onPostgres() bool { return e.cfg.DatabaseURL != "" }

// openStore opens the store e's config names, as chat and serve do
// (bbolt at TIDYBOT_DB or PostgreSQL at TIDYBOT_DATABASE_URL, sealed
// with TIDYBOT_SECRET_KEY); it is closed at the end of t unless the
// test closes it first.
func (e *env) openStore(t *testing.T) appStore {
	t.Helper()
	st, err := openStore(t.Context(), e.cfg)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// stored returns every byte the database holds, to search for text that
// must not be kept: the whole bbolt file (free pages included), or on
// PostgreSQL each value of each row of every table of the test's
// schema (rows a DELETE left for VACUUM are PostgreSQL's files, out of
// SQL's sight).
func (e *env) stored(t *testing.T) []byte {
	t.Helper()
	if !e.onPostgres() {
		db, err := os.ReadFile(e.cfg.DB)
		if err != nil {
			t.Fatalf("read the database file: %v", err)
		}
		return db
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, e.cfg.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the database: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`)
	if err != nil {
		t.Fatalf("list the tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("list the tables: %v", err)
	}
	if len(tables) == 0 {
		t.Fatal("the test's schema has no table")
	}
	var all bytes.Buffer
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
		if err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatalf("read a row of %s: %v", table, err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case []byte:
					all.Write(v)
				case string:
					all.WriteString(v)
				default:
					fmt.Fprint(&all, v)
				}
				all.WriteByte(0)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
	}
	return all.Bytes()
}
