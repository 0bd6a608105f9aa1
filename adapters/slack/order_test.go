package slack

import "testing"

func TestAfterOrdersByTS(t *testing.T) {
	a := &Adapter{}
	for _, tt := range []struct {
		x, y      string
		after, ok bool
	}{
		{"1700000000.000002", "1700000000.000001", true, true},
		{"1700000000.000001", "1700000000.000002", false, true},
		{"1700000001.000000", "1700000000.999999", true, true},
		{"1700000000.000001", "1700000000.000001", false, true},
		{"1700000000.1", "1700000000.000002", true, true}, // a short fraction is tenths
		{"hook:3", "1700000000.000001", false, false},     // posted through a response_url
		{"", "1700000000.000001", false, false},
		{"1700000000.000001", "-1.5", false, false},
	} {
		after, ok := a.After(tt.x, tt.y)
		if after != tt.after || ok != tt.ok {
			t.Errorf("After(%q, %q) = %v, %v; want %v, %v", tt.x, tt.y, after, ok, tt.after, tt.ok)
		}
	}
}
