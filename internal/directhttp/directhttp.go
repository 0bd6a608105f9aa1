// Package directhttp is an http.RoundTripper that serves a request with an
// http.Handler in the calling goroutine, with no socket. The fake servers
// (todoisttest, openaitest) hand it out as their DirectClient: inside a
// testing/synctest bubble, where real network I/O is not allowed, a real
// client library then runs against the fake on the bubble's fake clock.
package directhttp

import (
	"net/http"
	"net/http/httptest"
)

// Client returns an *http.Client whose requests h serves directly.
func Client(h http.Handler) *http.Client {
	return &http.Client{Transport: transport{h}}
}

// transport serves each request with h, as a server would receive it: a
// body (http.NoBody when none), RequestURI and a RemoteAddr set. A
// request whose context ends before or while it is served fails with the
// context's error, as over a network.
type transport struct{ h http.Handler }

// RoundTrip implements http.RoundTripper.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
