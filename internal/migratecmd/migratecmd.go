// Package migratecmd is tidybot migrate's own part: its arguments and
// the copy of a bbolt file into PostgreSQL (--from, --merge). cmd/tidybot
// gives it the opened stores.
package migratecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tidybot/tidybot/store"
	"github.com/tidybot/tidybot/store/postgres"
)

// Usage is tidybot migrate -h.
const Usage = `Usage: tidybot migrate [--from FILE [--merge]]

Brings the PostgreSQL schema at TIDYBOT_DATABASE_URL to this tidybot's
version (the migrations are built in) and prints what it applied. serve
and chat migrate at start too; run this before starting several replicas
of a new version, or to check a database. A schema newer than this
tidybot is refused: upgrade tidybot. With TIDYBOT_DATABASE_URL unset
(bbolt), serve and chat migrate the file at TIDYBOT_DB themselves.

--from FILE copies a bbolt database (TIDYBOT_DB of a tidybot that ran
without PostgreSQL) into TIDYBOT_DATABASE_URL: threads, messages, runs
with their transcripts and journals, jobs, the outbox, settings (team
mode's sealed tokens included: keep TIDYBOT_SECRET_KEY), Todoist
snapshots, dedupe keys and timers (digests, autopilot). Stop the tidybot using FILE first. The copy is
one transaction: if it fails, nothing is written and it can be run
again. The file is known by an id written in it, so once done, running
it again copies nothing, whatever path (or copy of the file) is given.
A database that holds conversations already is refused; --merge copies
into it all the same: where both hold a value the database's stays (a
run or a snapshot only if it is the newer), and each conversation's
messages are put in the order of their time.
`

// Args are migrate's arguments: the bbolt file of --from ("":
// none) and --merge.
type Args struct {
	From  string
	Merge bool
}

// Parse parses migrate's arguments.
func Parse(args []string) (Args, error) {
	var a Args
	bad := fmt.Errorf("migrate: unexpected arguments %q (try tidybot migrate -h)", args)
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "--merge" || arg == "-merge":
			a.Merge = true
		case strings.HasPrefix(arg, "--from=") && len(arg) > len("--from=") && a.From == "":
			a.From = strings.TrimPrefix(arg, "--from=")
		case arg == "--from" && i+1 < len(args) && args[i+1] != "" && a.From == "":
			a.From = args[i+1]
			i++
		default:
			return Args{}, bad
		}
	}
	if a.Merge && a.From == "" {
		return Args{}, errors.New("migrate: --merge goes with --from FILE")
	}
	return a, nil
}

var _ store.Sink = (*postgres.Importer)(nil)

// OpenBolt opens a bbolt file with the configured keys and more.
type OpenBolt func(path string, more ...store.Option) (*store.Store, error)

// Import copies the bbolt file of a.From into st, saying on out what it
// copied.
func Import(ctx context.Context, out io.Writer, st *postgres.Store, a Args, openBolt OpenBolt) error {
	path := a.From
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	id, err := boltFileID(ctx, openBolt, path)
	if err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	src, err := openBolt(path, store.ReadOnly(), store.WithLockTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("migrate --from: %w (stop the tidybot using it first)", err)
	}
	defer src.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	n, done, err := st.Import(ctx, postgres.Source{ID: id, Path: abs, Merge: a.Merge}, func(ctx context.Context, imp *postgres.Importer) error { return src.Export(ctx, imp) })
	if errors.Is(err, postgres.ErrNotEmpty) {
		return fmt.Errorf("migrate --from: the database at TIDYBOT_DATABASE_URL holds conversations already; to copy %s into it all the same, add --merge (where both hold a value the database's stays, and messages are put in time order)", abs)
	}
	if err != nil {
		return fmt.Errorf("migrate --from: %w", err)
	}
	if !done {
		_, err = fmt.Fprintf(out, "%s was copied before: nothing to do\n", abs)
		return err
	}
	kinds := make([]string, 0, len(n))
	for k, v := range n {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	_, err = fmt.Fprintf(out, "copied %s: %s\n", abs, strings.Join(kinds, ", "))
	return err
}

// boltFileID returns the id written in the bbolt file at path. A file
// no tidybot has written one in (all before issue 35) is opened for
// writing once, which writes it.
func boltFileID(ctx context.Context, openBolt OpenBolt, path string) (string, error) {
	for range 2 {
		src, err := openBolt(path, store.ReadOnly(), store.WithLockTimeout(time.Second))
		if err != nil {
			return "", fmt.Errorf("%w (stop the tidybot using it first)", err)
		}
		id, err := src.FileID(ctx)
		if cerr := src.Close(); err == nil {
			err = cerr
		}
		if err != nil || id != "" {
			return id, err
		}
		w, err := openBolt(path, store.WithLockTimeout(time.Second))
		if err != nil {
			return "", fmt.Errorf("write an id in %s: %w (stop the tidybot using it first)", path, err)
		}
		if err := w.Close(); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%s has no id after a write: is it read-only?", path)
}
