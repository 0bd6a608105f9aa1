package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Status is what Probe found at a database.
type Status struct {
	// Where names the database as host:port/name, without user or
	// password.
	Where string
	// Version is the schema's version, 0 for a database tidybot never
	// migrated; SchemaVersion is this tidybot's.
	Version int
	// Server is the PostgreSQL server's version (server_version).
	Server string
	// SessionPooled is false when the URL leads to a connection pooler
	// in transaction mode (Probe then also returns an error: Open
	// refuses it).
	SessionPooled bool
}

// Pending is how many migrations this tidybot would apply (negative: the
// schema is newer than this tidybot).
func (s Status) Pending() int { return SchemaVersion() - s.Version }

// Probe connects to the database at url on two connections of its own,
// reads its schema version, tells session pooling (or a direct
// connection) from a transaction pooler as Open does (pooledBySession:
// an advisory lock taken and released), and changes nothing else
// (tidybot check). Its errors are one line and never quote the URL's
// password: a URL that does not parse is not repeated, and a refused
// connection is named by host, port and database.
func Probe(ctx context.Context, url string) (Status, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return Status{}, errors.New("store: TIDYBOT_DATABASE_URL is not a valid PostgreSQL URL (postgres://user:password@host:5432/db)")
	}
	st := Status{Where: fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return st, fmt.Errorf("store: connect to PostgreSQL at %s: %s", st.Where, oneLine(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st.Server = conn.PgConn().ParameterStatus("server_version")
	err = conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM tidybot_schema`).Scan(&st.Version)
	if err != nil && !isUndefinedTable(err) {
		return st, fmt.Errorf("store: schema version at %s: %s", st.Where, oneLine(err))
	}
	other, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return st, fmt.Errorf("store: connect to PostgreSQL at %s a second time: %s", st.Where, oneLine(err))
	}
	defer other.Close(context.WithoutCancel(ctx))
	st.SessionPooled, err = pooledBySession(ctx, conn, other)
	if err != nil {
		return st, fmt.Errorf("store: check for a transaction pooler at %s: %s", st.Where, oneLine(err))
	}
	if !st.SessionPooled {
		return st, errTransactionPooler
	}
	return st, nil
}

// oneLine is err's message on one line: pgx names each address it tried
// on a line of its own (localhost's two, often with the same reason);
// repeated lines are said once.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
