package web

import (
	"log/slog"
	"net/http"
	"testing"
)

// TestServeTimeoutsAreSet guards the defaults: each bound is set.
func TestServeTimeoutsAreSet(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), DefaultTimeouts, slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Errorf("server bounds: header %v, read %v, write %v, idle %v, header bytes %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
