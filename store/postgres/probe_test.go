package postgres

import (
	"net"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestProbeReadsTheSchemaVersion: an empty schema is version 0 with
// every migration pending; after Open it is this tidybot's; Probe
// itself creates nothing.
func TestProbeReadsTheSchemaVersion(t *testing.T) {
	u := pgtest.URL(t)
	st, err := Probe(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != 0 || st.Pending() != SchemaVersion() || st.Server == "" || !strings.HasSuffix(st.Where, "/test") {
		t.Errorf("empty schema: %+v, pending %d; want version 0, %d pending, a server version, .../test", st, st.Pending(), SchemaVersion())
	}
	if again, err := Probe(t.Context(), u); err != nil || again.Version != 0 {
		t.Errorf("Probe twice: %+v, %v: the first probe changed the database", again, err)
	}
	s, err := Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, err = Probe(t.Context(), u); err != nil || st.Version != SchemaVersion() || st.Pending() != 0 {
		t.Errorf("after Open: %+v, %v; want version %d", st, err, SchemaVersion())
	}
}

// TestProbeErrorsHoldNoPassword: a refused connection and a URL that
// does not parse are said without the password.
func TestProbeErrorsHoldNoPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: refused
	for _, u := range []string{
		"postgres://tidybot:pw-do-not-show@" + addr + "/tidybot?sslmode=disable&connect_timeout=2",
		"postgres://tidybot:pw-do-not-show@db:notaport/tidybot",
	} {
		_, err := Probe(t.Context(), u)
		if err == nil || strings.Contains(err.Error(), "pw-do-not-show") {
			t.Errorf("Probe(%s) = %v; want an error without the password", u, err)
		}
	}
	if _, err := Probe(t.Context(), "postgres://tidybot:pw@"+addr+"/tidybot?sslmode=disable"); err == nil || !strings.Contains(err.Error(), addr+"/tidybot") {
		t.Errorf("refused: %v; want it to name %s/tidybot", err, addr)
	}
}

// TestProbeTellsTheTransactionPooler: check (Probe) tells what Open
// refuses: through PgBouncer in transaction mode Probe fails saying
// session pooling is needed; in session mode it passes, saying so; a
// refused connection is said on one line (pgx gives a line per address
// tried).
func TestProbeTellsTheTransactionPooler(t *testing.T) {
	u := pgtest.URL(t)
	st, err := Probe(t.Context(), startPgBouncer(t, u, "session"))
	if err != nil || !st.SessionPooled {
		t.Errorf("through a session pooler: %+v, %v", st, err)
	}
	st, err = Probe(t.Context(), startPgBouncer(t, u, "transaction"))
	if err == nil || !strings.Contains(err.Error(), "session pooling") || st.SessionPooled {
		t.Errorf("through a transaction pooler: %+v, %v; want the refusal", st, err)
	}
	if _, err := Probe(t.Context(), "postgres://tidybot:pw@localhost:1/tidybot?sslmode=disable"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("refused at localhost: %q; want one line", err)
	}
}
