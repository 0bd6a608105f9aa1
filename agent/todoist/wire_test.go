package todoist

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// A /sync label's position is order in Doist's SDK and item_order on the
// API page: both are read, order first.
func TestSyncLabelsSortByEitherSpellingOfTheirOrder(t *testing.T) {
	tests := []struct {
		name, labels string
	}{
		{"order (the SDK's)", `[{"id":"3","name":"c","order":3},{"id":"1","name":"a","order":1},{"id":"2","name":"b","order":2}]`},
		{"item_order (the API page's)", `[{"id":"3","name":"c","item_order":3},{"id":"1","name":"a","item_order":1},{"id":"2","name":"b","item_order":2}]`},
		{"both: order wins", `[{"id":"3","name":"c","order":3,"item_order":1},{"id":"1","name":"a","order":1,"item_order":3},{"id":"2","name":"b","order":2,"item_order":2}]`},
		{"order null: item_order", `[{"id":"3","name":"c","order":null,"item_order":3},{"id":"1","name":"a","order":null,"item_order":1},{"id":"2","name":"b","order":null,"item_order":2}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r syncResponse
			if err := json.Unmarshal([]byte(`{"labels":`+tt.labels+`}`), &r); err != nil {
				t.Fatal(err)
			}
			got := snapshotOf(&r).Labels
			want := []agent.Label{{ID: "1", Name: "a"}, {ID: "2", Name: "b"}, {ID: "3", Name: "c"}}
			if !slices.Equal(got, want) {
				t.Fatalf("labels %v, want %v", got, want)
			}
		})
	}
}
