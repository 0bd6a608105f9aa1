package bot

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// threadStreamer is a fake platform that, as Slack does, opens previews
// only in threads and can look for the previews a dead process left.
type threadStreamer struct{ *fakePlatform }

func (threadStreamer) StartStream(context.Context, Outgoing, string) (Stream, error) {
	return nil, errors.New("no preview in this fake")
}
func (threadStreamer) StreamsIn(_, threadID string) bool                   { return threadID != "" }
func (threadStreamer) DeleteMessage(context.Context, string, string) error { return nil }

// previewReads counts the reads of preview records (StreamKey).
type previewReads struct {
	*memStore
	n atomic.Int32
}

func (s *previewReads) Setting(ctx context.Context, key string) (string, error) {
	if strings.HasPrefix(key, StreamKey("")) {
		s.n.Add(1)
	}
	return s.memStore.Setting(ctx, key)
}

// TestNoPreviewRecordReadWhereNoneOpens: where the platform opens no
// preview (a top-level DM on Slack) none was recorded, so neither the
// run's start nor its answer's post reads a record; in a thread both
// look for one.
func TestNoPreviewRecordReadWhereNoneOpens(t *testing.T) {
	st := &previewReads{memStore: newMemStore()}
	plat := threadStreamer{newTelegram()}
	b := New(st, &mockAgent{}, Config{Workers: 2, AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(plat)
	ctx, cancel := context.WithCancel(t.Context())
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(); cancel() })
	h := &harness{store: st.memStore, bot: b, plat: plat.fakePlatform}
	h.handle(t, msg("what's due today?", "u1"))
	h.idle(t)
	if n := st.n.Load(); n != 0 || len(plat.texts()) == 0 {
		t.Fatalf("%d preview records read for a run outside a thread (%d posts), want 0", n, len(plat.texts()))
	}
	in := msg("and tomorrow?", "u2")
	in.ThreadID = "t1"
	h.handle(t, in)
	h.idle(t)
	if n := st.n.Load(); n != 2 {
		t.Errorf("%d preview records read for a run in a thread, want 2 (its start, its answer)", n)
	}
}
