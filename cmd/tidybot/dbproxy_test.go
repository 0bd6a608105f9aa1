package main

import (
	"testing"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// dbProxy is a TCP relay between one replica and PostgreSQL
// (pgtest.Proxy): cut() drops every byte either way without closing
// anything (a network cut, not a closed socket); heal() closes every
// connection the cut made dead, as the TCP keepalives of both ends do on
// a real network well within a 30 s cut, and lets new connections
// through.
type dbProxy struct{ *pgtest.Proxy }

func newDBProxy(t testing.TB, target string) *dbProxy { return &dbProxy{pgtest.NewProxy(t, target)} }

func (p *dbProxy) via(t testing.TB, u string) string { return p.Via(t, u) }
func (p *dbProxy) cut()                              { p.Cut() }
func (p *dbProxy) heal()                             { p.CloseAll(); p.Heal() }
