package slack

import (
	"fmt"
	"testing"
)

// The panes remembered are bounded: a long-running process that sees a
// thread after thread does not keep every one.
func TestPanesAreBounded(t *testing.T) {
	var p panes
	for i := range maxPanes + 10 {
		p.get("D1", fmt.Sprint(i), true).titled = true
	}
	if n := len(p.m); n > maxPanes {
		t.Errorf("%d panes remembered, want at most %d", n, maxPanes)
	}
	if got := p.get("D1", fmt.Sprint(maxPanes+9), false); got == nil || !got.titled {
		t.Errorf("the newest pane was forgotten: %+v", got)
	}
}
