package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// pretendPooler runs its clients' statements as a pooler in
// transaction mode does: each statement, or each transaction, on the
// server connection most recently left idle (as PgBouncer picks one,
// server_round_robin = 0), returned to the idle ones when it ends.
type pretendPooler struct {
	mu   sync.Mutex
	idle []*pgx.Conn
}

func (p *pretendPooler) take() *pgx.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return c
}

func (p *pretendPooler) put(c *pgx.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, c)
}

// pooledClient is one client connection of a pretendPooler.
type pooledClient struct{ p *pretendPooler }

func (c pooledClient) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	conn := c.p.take()
	defer c.p.put(conn)
	var vals []any
	rows, err := conn.Query(ctx, sql, args...)
	if err == nil {
		defer rows.Close()
		if rows.Next() {
			vals, err = rows.Values()
		}
	}
	return rowOf{vals, err}
}

func (c pooledClient) Begin(ctx context.Context) (pgx.Tx, error) {
	conn := c.p.take()
	tx, err := conn.Begin(ctx)
	if err != nil {
		c.p.put(conn)
		return nil, err
	}
	return heldTx{tx, func() { c.p.put(conn) }}, nil
}

// rowOf is a row read already.
type rowOf struct {
	vals []any
	err  error
}

func (r rowOf) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *int32:
			*d = r.vals[i].(int32)
		case *bool:
			*d = r.vals[i].(bool)
		default:
			return fmt.Errorf("rowOf: cannot scan into %T", d)
		}
	}
	return nil
}

// heldTx is a transaction whose server connection goes back to the
// pooler when it ends.
type heldTx struct {
	pgx.Tx
	release func()
}

func (t heldTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}

// TestTransactionPoolerIsDetected: through a session pooler (or none)
// two clients have server sessions of their own and an advisory lock a
// statement takes is seen by the next; through a transaction pooler
// they share them, and Open's check refuses it with a message that
// names the fix.
func TestTransactionPoolerIsDetected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	var conns []*pgx.Conn
	for range 3 {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(ctx) })
		conns = append(conns, c)
	}
	if ok, err := pooledBySession(ctx, conns[0], conns[1]); !ok || err != nil {
		t.Errorf("direct connections: pooled by session %v, %v; want true", ok, err)
	}
	var held int
	if err := conns[2].QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, conns[0].PgConn().PID()).Scan(&held); err != nil || held != 0 {
		t.Errorf("advisory locks left by the check: %d, %v", held, err)
	}
	p := &pretendPooler{idle: conns}
	if ok, err := pooledBySession(ctx, pooledClient{p}, pooledClient{p}); ok || err != nil {
		t.Errorf("a transaction pooler: pooled by session %v, %v; want false", ok, err)
	}
	if msg := errTransactionPooler.Error(); !strings.Contains(msg, "session pooling") || !strings.Contains(msg, "docs/deploy.md") {
		t.Errorf("the refusal does not say what to do: %q", msg)
	}
}

// startPgBouncer runs Debian's pgbouncer (the test skips without it) in
// front of the test database's schema of u, in pool mode mode, and
// returns the URL that reaches it.
func startPgBouncer(t *testing.T, u, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			t.Skip("no pgbouncer (apt-get install pgbouncer)")
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	schema := pu.Query().Get("search_path")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	// Not t.TempDir, whose parent only its owner may enter: pgbouncer
	// runs as nobody when the test runs as root.
	dir, err := os.MkdirTemp("", "tidybot-pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	user := pu.User.Username()
	host, dbPort, _ := net.SplitHostPort(pu.Host)
	ini := fmt.Sprintf(`[databases]
tidy = host=%s port=%s dbname=%s user=%s connect_query='SET search_path TO %s'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
auth_type = any
pool_mode = %s
server_reset_query =
unix_socket_dir =
logfile = %s
pidfile = %s
`, host, dbPort, strings.TrimPrefix(pu.Path, "/"), user, schema, port, mode, filepath.Join(dir, "log"), filepath.Join(dir, "pid"))
	cfg := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(cfg, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{cfg}
	if os.Geteuid() == 0 {
		args = []string{"-u", "nobody", cfg}
	}
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Skipf("pgbouncer does not start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("pgbouncer does not listen on %s:\n%s%s", addr, log, out.String())
		}
	}
	return fmt.Sprintf("postgres://%s@%s/tidy", user, addr)
}

// TestOpenThroughPgBouncer: through PgBouncer in session mode the store
// opens and leases; in transaction mode Open refuses, saying that
// session pooling is needed.
func TestOpenThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	s, err := Open(ctx, startPgBouncer(t, u, "session"))
	if err != nil {
		t.Fatalf("Open through a session pooler: %v", err)
	}
	defer s.Close()
	if ok, err := s.Hold(ctx, "telegram:5:"); !ok || err != nil {
		t.Errorf("Hold through a session pooler: %v %v", ok, err)
	}
	_, err = Open(ctx, startPgBouncer(t, u, "transaction"))
	if err == nil || !strings.Contains(err.Error(), "session pooling") {
		t.Errorf("Open through a transaction pooler: %v, want the refusal", err)
	}
}
