package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/store/postgres"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestCheckDatabaseURL: with TIDYBOT_DATABASE_URL set, check asks that
// PostgreSQL (not the bbolt file TIDYBOT_DB names): a dead one fails
// naming host, port and database and never the password; a live one
// says its schema version, the migrations pending, or that it is newer
// than this tidybot.
func TestCheckDatabaseURL(t *testing.T) {
	const password = "pw-do-not-show"
	t.Run("dead", func(t *testing.T) {
		e := newCheckEnv(t)
		addr := refusedAddr(t)
		e.cfg.DatabaseURL = "postgres://tidybot:" + password + "@" + addr + "/tidybot?sslmode=disable"
		lines, out, err := e.check(t)
		if want := "FAIL store: connect to PostgreSQL at " + addr + "/tidybot: "; !strings.HasPrefix(lines["database"], want) ||
			!strings.HasSuffix(lines["database"], "check TIDYBOT_DATABASE_URL") {
			t.Errorf("database: %q; want %q… check TIDYBOT_DATABASE_URL\n%s", lines["database"], want, out)
		}
		if err == nil {
			t.Error("check passed against a dead database")
		}
		if strings.Contains(out, password) || strings.Contains(out, e.cfg.DB) {
			t.Errorf("the output holds the password or names the bbolt file:\n%s", out)
		}
	})

	// setVersion makes the database's schema version v (a tidybot older
	// or newer than this one migrated it last).
	setVersion := func(t *testing.T, url string, v int) {
		t.Helper()
		st, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), `DELETE FROM tidybot_schema WHERE version > $1`, v); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `INSERT INTO tidybot_schema (version) VALUES ($1) ON CONFLICT DO NOTHING`, v); err != nil {
			t.Fatal(err)
		}
	}
	latest := postgres.SchemaVersion()
	for _, tt := range []struct {
		name    string
		version int // -1: an empty database
		want    string
		fail    bool
	}{
		{name: "empty", version: -1, want: "ok PostgreSQL %s at 127.0.0.1:5432/test: no tidybot schema yet"},
		{name: "current", version: latest, want: fmt.Sprintf("ok PostgreSQL %%s at 127.0.0.1:5432/test: schema version %d", latest)},
		{name: "behind", version: latest - 1, want: fmt.Sprintf("warn PostgreSQL %%s at 127.0.0.1:5432/test: schema version %d, this tidybot %d: 1 migration pending", latest-1, latest)},
		{name: "newer", version: latest + 1, fail: true, want: fmt.Sprintf("FAIL PostgreSQL %%s at 127.0.0.1:5432/test: schema version %d, newer than this tidybot (%d): upgrade tidybot", latest+1, latest)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newCheckEnv(t)
			e.cfg.DatabaseURL = pgtest.URL(t)
			if !strings.Contains(e.cfg.DatabaseURL, "127.0.0.1:5432/test") {
				t.Skip("the expected lines name the default test server")
			}
			if tt.version >= 0 {
				setVersion(t, e.cfg.DatabaseURL, tt.version)
			}
			st, err := postgres.Probe(t.Context(), e.cfg.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			lines, out, err := e.check(t)
			if want := fmt.Sprintf(tt.want, st.Server); !strings.HasPrefix(lines["database"], want) {
				t.Errorf("database: %q; want it to start %q\n%s", lines["database"], want, out)
			}
			if (err != nil) != tt.fail {
				t.Errorf("check: %v; want failed %v", err, tt.fail)
			}
		})
	}
}
