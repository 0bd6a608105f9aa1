package web

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Waiting is what serve calls while a platform cannot be reached at
// start, before each wait for it: it logs why, marks the server not
// ready with the reason (an agent error's message: no secret) and
// starts serving, errc as Start's, so that /healthz says why instead of
// not answering. Start later is then a no-op, and Ready ends it.
func (s *Server) Waiting(errc chan<- error) func(err error, wait time.Duration) {
	return func(err error, wait time.Duration) {
		s.log.Warn("a platform cannot be reached; /healthz says not ready until it can", slog.Any("err", err), slog.Duration("retry_in", wait))
		s.NotReady(agent.ErrorMessageOf(err))
		if err := s.Start(errc); err != nil {
			s.log.Error("cannot serve /healthz while waiting", slog.Any("err", err))
		}
	}
}

// NotReady makes healthPath answer 503 with reason, and every other
// route 503 with Retry-After (a webhook's sender delivers again later),
// until Ready: serve is listening but cannot take work yet (a platform
// unreachable at start). reason is shown to whoever asks /healthz: it
// must hold no secret.
func (s *Server) NotReady(reason string) { s.notReady.Store(&reason) }

// Ready ends NotReady.
func (s *Server) Ready() { s.notReady.Store(nil) }

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if r := s.notReady.Load(); r != nil {
		http.Error(w, "not ready: "+*r, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// gate answers 503 on every route but healthPath while not ready.
func (s *Server) gate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.notReady.Load() != nil && r.URL.Path != healthPath {
			w.Header().Set("Retry-After", "10")
			http.Error(w, "starting: try again shortly", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}
