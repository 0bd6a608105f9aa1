package main

import (
	"bytes"
	"strings"
	"testing"
)

// What a person said is gone from the database after /reset, not only
// from the model's sight: grep finds it nowhere in the bbolt file, free
// pages included (issue 21, "Data really gone"), nor in any row of
// PostgreSQL.
func TestResetLeavesNoTextInTheDatabase(t *testing.T) {
	e := newEnv(t)
	const marker = "ZEBRA-CROSSING-93c1"
	out := e.chat(t, "please remember "+marker+"\nand "+marker+" again\n/reset\n", nil)
	if !strings.Contains(out, "I forgot our conversation here") {
		t.Fatalf("no /reset confirmation:\n%s", out)
	}
	db := e.stored(t)
	if i := bytes.Index(db, []byte(marker)); i >= 0 {
		t.Errorf("after /reset the database holds %q: …%q…", marker, db[max(0, i-60):i+len(marker)])
	}
}
