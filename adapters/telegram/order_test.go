package telegram

import "testing"

func TestAfterOrdersByMessageID(t *testing.T) {
	a := &Adapter{}
	for _, tt := range []struct {
		x, y      string
		after, ok bool
	}{
		{"12", "11", true, true}, {"11", "12", false, true}, {"9", "10", false, true},
		{"", "10", false, false}, {"x", "10", false, false}, {"0", "10", false, false},
	} {
		after, ok := a.After(tt.x, tt.y)
		if after != tt.after || ok != tt.ok {
			t.Errorf("After(%q, %q) = %v, %v; want %v, %v", tt.x, tt.y, after, ok, tt.after, tt.ok)
		}
	}
}
