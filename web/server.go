// Package web is serve's HTTP surface: one mux on TIDYBOT_HTTP_ADDR for
// the platforms' webhooks, team mode's OAuth pages, run pages and
// /healthz; /metrics on its own address; the Unix socket `tidybot runs`
// asks while serve holds the database; and the limits every one of these
// servers puts on slow clients, in one place.
package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Timeouts bound what one client may hold of a server: a client
// dribbling its headers or body, or keeping idle connections, is cut off.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	// MaxHeaderBytes caps the request line and headers (431 beyond).
	MaxHeaderBytes int
}

// DefaultTimeouts are generous for Slack and Telegram, whose requests are
// small (a few KB) and sent at once, and whose ack is due within 3 s.
var DefaultTimeouts = Timeouts{ReadHeader: 5 * time.Second, Read: 15 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second, MaxHeaderBytes: 32 << 10}

// ShutdownWait is how long the servers get at shutdown to finish the
// requests in flight. deploy/compose.yaml and deploy/tidybot.service
// allow more than it and the runs' grace together before a SIGKILL.
const ShutdownWait = 5 * time.Second

// NewServer returns a server for h bounded by t; its own errors (a
// client's bad TLS, a panic) go to log as warnings.
func NewServer(h http.Handler, t Timeouts, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle,
		MaxHeaderBytes: t.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Config is serve's HTTP surface.
type Config struct {
	// Addr is TIDYBOT_HTTP_ADDR: webhooks, OAuth pages, run pages, /healthz.
	Addr string
	// MetricsAddr is TIDYBOT_METRICS_ADDR: /metrics alone ("": off).
	MetricsAddr string
	// Metrics serves GET /metrics on MetricsAddr.
	Metrics http.Handler
	// RunPages serves GET /runs/{id}, a run's signed page (nil: none).
	RunPages http.Handler
	// Timeouts bound slow clients (nil: DefaultTimeouts; tests shorten them).
	Timeouts *Timeouts
	Logger   *slog.Logger
}

// Server is serve's HTTP servers: Mux's routes on Addr, /metrics on
// MetricsAddr, and the run socket.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	addr    string
	servers []*http.Server
	// notReady, when set, is why serve cannot take work yet (see NotReady).
	notReady atomic.Pointer[string]
}

// New returns the surface with its own routes: /healthz, and the run
// pages when cfg.RunPages is set. The platforms' webhooks and team
// mode's pages are added to Mux before Start.
func New(cfg Config) *Server {
	if cfg.Timeouts == nil {
		cfg.Timeouts = &DefaultTimeouts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+healthPath, s.health)
	if cfg.RunPages != nil {
		s.mux.Handle("GET /runs/{id}", cfg.RunPages)
	}
	return s
}

// Mux is the mux served on Addr.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Addr is the address Start listens on (its port chosen when Addr's is 0).
func (s *Server) Addr() string { return s.addr }

// Start listens on Addr and MetricsAddr, both before either serves, so
// whoever sees /healthz answer can reach /metrics too; then serves them.
// A server that stops sends its error to errc.
func (s *Server) Start(errc chan<- error) error {
	if s.addr != "" {
		return nil // started early by Waiting
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on TIDYBOT_HTTP_ADDR %s: %w", s.cfg.Addr, err)
	}
	var mln net.Listener
	if s.cfg.MetricsAddr != "" {
		mln, err = net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen on TIDYBOT_METRICS_ADDR %s: %w", s.cfg.MetricsAddr, err)
		}
	}
	s.addr = ln.Addr().String()
	s.log.Info("serving webhooks and /healthz", slog.String("addr", s.addr))
	s.serve(ln, s.gate(s.mux), errc)
	if mln != nil {
		mmux := http.NewServeMux()
		mmux.Handle("GET /metrics", s.cfg.Metrics)
		s.log.Info("serving /metrics", slog.String("addr", mln.Addr().String()))
		s.serve(mln, mmux, errc)
	}
	return nil
}

func (s *Server) serve(ln net.Listener, h http.Handler, errc chan<- error) {
	srv := NewServer(h, *s.cfg.Timeouts, s.log)
	s.servers = append(s.servers, srv)
	go func() { errc <- srv.Serve(ln) }()
}

// ServeSocket serves h on a Unix socket at path, which only this user
// may reach (`tidybot runs` asks there while serve holds the database).
// A socket that cannot be made is logged, not fatal: runs then says so.
func (s *Server) ServeSocket(path string, h http.Handler, errc chan<- error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(path) // left by a serve that was killed; we hold the database now
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		s.log.Warn("tidybot runs will not work while serve runs: no socket beside the database", slog.String("path", path), slog.Any("err", err))
		return
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		s.log.Warn("tidybot runs will not work while serve runs: socket permissions", slog.String("path", path), slog.Any("err", err))
		return
	}
	srv := NewServer(h, *s.cfg.Timeouts, s.log)
	s.servers = append(s.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
}

// Shutdown stops every server, giving the requests in flight
// ShutdownWait, and logs how long it waited.
func (s *Server) Shutdown(ctx context.Context) {
	start := time.Now()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownWait)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(shutCtx); err != nil {
			s.log.Warn("shutdown: HTTP requests still in flight were cut off", slog.String("waited", time.Since(start).Round(time.Millisecond).String()), slog.Any("err", err))
			_ = srv.Close()
		}
	}
	s.log.Info("shutdown: HTTP servers stopped", slog.String("waited", time.Since(start).Round(time.Millisecond).String()))
}
