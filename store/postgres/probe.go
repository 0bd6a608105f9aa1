package postgres

import (
	"context"
	"errors"
	"fmt"

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
}

// Pending is how many migrations this tidybot would apply (negative: the
// schema is newer than this tidybot).
func (s Status) Pending() int { return SchemaVersion() - s.Version }

// Probe connects to the database at url on one connection of its own,
// reads its schema version and changes nothing (tidybot check). Its
// errors never quote the URL's password: a URL that does not parse is
// not repeated, and a refused connection is named by host, port and
// database.
func Probe(ctx context.Context, url string) (Status, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return Status{}, errors.New("store: TIDYBOT_DATABASE_URL is not a valid PostgreSQL URL (postgres://user:password@host:5432/db)")
	}
	st := Status{Where: fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return st, fmt.Errorf("store: connect to PostgreSQL at %s: %w", st.Where, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st.Server = conn.PgConn().ParameterStatus("server_version")
	err = conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM tidybot_schema`).Scan(&st.Version)
	if err != nil && !isUndefinedTable(err) {
		return st, fmt.Errorf("store: schema version at %s: %w", st.Where, err)
	}
	return st, nil
}
