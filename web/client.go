package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// StatusError is an answer other than 200 OK; Body is what it said.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return e.Body }

// NoAnswerError is a request no server answered.
type NoAnswerError struct{ Err error }

func (e *NoAnswerError) Error() string { return e.Err.Error() }
func (e *NoAnswerError) Unwrap() error { return e.Err }

// GetSocket asks the server on the Unix socket sock (see ServeSocket)
// for path and copies a 200's body to w; no answer is a *NoAnswerError,
// another status a *StatusError.
func GetSocket(ctx context.Context, sock, path string, w io.Writer) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tidybot"+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &NoAnswerError{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return &StatusError{Code: resp.StatusCode, Body: string(body)}
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// Call serves req with h in this process, as GetSocket asks a server:
// a 200's body goes to w, another status is a *StatusError.
func Call(h http.Handler, req *http.Request, w io.Writer) error {
	rec := &textRecorder{w: w}
	h.ServeHTTP(rec, req)
	if rec.code != 0 && rec.code != http.StatusOK {
		return &StatusError{Code: rec.code, Body: string(rec.body)}
	}
	return nil
}

// textRecorder is a ResponseWriter that passes a 200's body to w and
// keeps an error's.
type textRecorder struct {
	w    io.Writer
	code int
	body []byte
	h    http.Header
}

func (r *textRecorder) Header() http.Header {
	if r.h == nil {
		r.h = http.Header{}
	}
	return r.h
}

func (r *textRecorder) WriteHeader(code int) { r.code = code }

func (r *textRecorder) Write(p []byte) (int, error) {
	if r.code != 0 && r.code != http.StatusOK {
		r.body = append(r.body, p...)
		return len(p), nil
	}
	return r.w.Write(p)
}
