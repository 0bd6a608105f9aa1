package web

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeTimeoutsAreSet guards the defaults: each bound is set.
func TestServeTimeoutsAreSet(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), DefaultTimeouts, slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Errorf("server bounds: header %v, read %v, write %v, idle %v, header bytes %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}

// TestServerRoutesHealthAndSocket: Start serves /healthz (CheckHealth
// says ok) and not /metrics, which has its own address; the socket
// answers GetSocket, only for this user, and a 404 there is a
// StatusError; nothing listening is a NoAnswerError.
func TestServerRoutesHealthAndSocket(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	s := New(Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Metrics: metrics})
	errc := make(chan error, 3)
	if err := s.Start(errc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(t.Context()) })
	if err := CheckHealth(t.Context(), s.Addr()); err != nil {
		t.Errorf("health: %v", err)
	}
	if resp, err := http.Get("http://" + s.Addr() + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the webhook address: %v %v, want 404", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	sock := filepath.Join(t.TempDir(), "db.sock")
	s.ServeSocket(sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/runs" {
			http.Error(w, "no run with id nope", http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, "the runs\n")
	}), errc)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want mode 0600", fi, err)
	}
	var out bytes.Buffer
	if err := GetSocket(t.Context(), sock, "/runs", &out); err != nil || out.String() != "the runs\n" {
		t.Errorf("GetSocket: %q, %v", out.String(), err)
	}
	var se *StatusError
	if err := GetSocket(t.Context(), sock, "/runs/nope", &out); !errors.As(err, &se) || se.Code != 404 || !strings.Contains(se.Body, "no run with id nope") {
		t.Errorf("GetSocket of a missing run: %v, want a 404 StatusError", err)
	}
	var no *NoAnswerError
	if err := GetSocket(t.Context(), filepath.Join(t.TempDir(), "none.sock"), "/runs", &out); !errors.As(err, &no) {
		t.Errorf("GetSocket with no server: %v, want a NoAnswerError", err)
	}
}
