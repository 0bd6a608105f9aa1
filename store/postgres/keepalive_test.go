package postgres

import (
	"context"
	"testing"
)

// TestLeaseConnectionKeepsAlive: the lease connection holds the
// replica lock that says this replica is alive; like every connection
// of the store (the pool's, listen's, the lead's) it asks the server for
// TCP keepalives, so that a replica cut off by the network is noticed
// in seconds, not after the server system's two hours. (Issue 35: it
// asked for none.)
func TestLeaseConnectionKeepsAlive(t *testing.T) {
	s, _ := openTest(t)
	if _, err := s.Hold(t.Context(), "telegram:c:"); err != nil {
		t.Fatal(err)
	}
	s.leases.mu.Lock()
	conn := s.leases.conn
	s.leases.mu.Unlock()
	for name, want := range map[string]string{"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "3"} {
		var got string
		s.leases.mu.Lock()
		err := conn.QueryRow(context.Background(), `SELECT current_setting($1)`, name).Scan(&got)
		s.leases.mu.Unlock()
		if err != nil || got != want {
			t.Errorf("lease connection: %s = %q (%v), want %s as on the lead's connection", name, got, err, want)
		}
		if err := s.pool.QueryRow(t.Context(), `SELECT current_setting($1)`, name).Scan(&got); err != nil || got != want {
			t.Errorf("pool connection: %s = %q (%v), want %s", name, got, err, want)
		}
	}
}
