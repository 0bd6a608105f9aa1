package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
)

// TestSendQueueAfterItsLanesStopped: a call queued once the lanes have
// stopped is answered ErrStopped at once, never left in a lane that no
// one reads (which kept WaitIdle waiting and the answer unrecorded).
func TestSendQueueAfterItsLanesStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quit := make(chan struct{})
		s := New("telegram", slog.New(slog.DiscardHandler), quit)
		stopped := make(chan struct{})
		go func() { s.Run(t.Context()); close(stopped) }()
		close(quit)
		<-stopped
		never := func(context.Context) error { t.Error("a call was made after the lanes stopped"); return nil }
		for i := range 20 { // a lane with room used to be picked half the time
			var got error
			s.PostThen(fmt.Sprint("c", i), "send", never, func(err error) { got = err })
			if !errors.Is(got, ErrStopped) {
				t.Fatalf("postThen after stop: %v, want ErrStopped", got)
			}
			if err := s.Do(t.Context(), fmt.Sprint("c", i), "edit", never); !errors.Is(err, ErrStopped) {
				t.Fatalf("do after stop: %v, want ErrStopped", err)
			}
		}
		if err := s.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
