package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tidybot/tidybot/bot"
)

// TestAutopilotPeopleKeepsEveryoneAcrossReplicas: two people turning
// autopilot on at once through two replicas are both among the people
// Todoist's webhooks are matched against. The list was one setting,
// read, changed and written back under a mutex of the process only, and
// lost one of them (issue 35); now each person is a setting of their own.
func TestAutopilotPeopleKeepsEveryoneAcrossReplicas(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	botA := bot.New(a, echoAgent{}, bot.Config{})
	botB := bot.New(b, echoAgent{}, bot.Config{})
	for round := 0; round < 50; round++ {
		var wg sync.WaitGroup
		for i, bt := range []*bot.Bot{botA, botB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := bt.SaveSettings(ctx, "telegram", fmt.Sprintf("%d-%d", round, i), bot.PersonSettings{Autopilot: true}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		people, err := botA.AutopilotPeople(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if who := fmt.Sprintf("telegram:%d-%d", round, i); !slices.Contains(people, who) {
				t.Fatalf("round %d: %s turned autopilot on but is not in autopilot-people %v", round, who, people)
			}
		}
	}
}
