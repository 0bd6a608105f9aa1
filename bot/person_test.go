package bot

import "testing"

// TestPersonID: a person's id is the allowlist's "platform:user id",
// every per-person key is built from it (so keys already stored keep
// their meaning), and personOf reads it back.
func TestPersonID(t *testing.T) {
	tests := []struct {
		name, platform, userID, want string
	}{
		{"telegram", "telegram", "42", "telegram:42"},
		{"slack", "slack", "U0ABC", "slack:U0ABC"},
		{"user id with a colon", "slack", "U1:x", "slack:U1:x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := PersonID(tt.platform, tt.userID)
			if id != tt.want {
				t.Errorf("PersonID(%q, %q) = %q, want %q", tt.platform, tt.userID, id, tt.want)
			}
			p, u := personOf(id)
			if p != tt.platform || u != tt.userID {
				t.Errorf("personOf(%q) = %q, %q, want %q, %q", id, p, u, tt.platform, tt.userID)
			}
		})
	}
	if got, want := personKey("telegram", "42"), "person:telegram:42"; got != want {
		t.Errorf("personKey = %q, want %q", got, want)
	}
	if got, want := pendingKey("telegram", "42"), PendingPrefix+"telegram:42"; got != want {
		t.Errorf("pendingKey = %q, want %q", got, want)
	}
	b := New(newMemStore(), &mockAgent{}, Config{AllowedUsers: []string{"telegram:42"}})
	if !b.Allowed("telegram", "42") {
		t.Error("telegram:42 in AllowedUsers is not allowed")
	}
}
