package todoist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// SnapshotStore keeps an account's last snapshot and sync token across
// restarts, so that the first read after one is incremental too. The
// store package implements it; cmd/tidybot wires it in.
type SnapshotStore interface {
	// LoadSnapshot returns the data last saved under key, or nil and no
	// error when there is none.
	LoadSnapshot(ctx context.Context, key string) ([]byte, error)
	// SaveSnapshot replaces the data saved under key. The time of the
	// last save stands for the account's last use: a store may delete a
	// snapshot not saved for its retention period (Snapshot saves at
	// least every snapTouch while the account is read).
	SaveSnapshot(ctx context.Context, key string, data []byte) error
}

// snapTouch is how long Snapshot goes without saving an unchanged
// snapshot, so that its store sees the account in use.
const snapTouch = time.Hour

// WithSnapshotStore keeps the account's last snapshot in s.
func WithSnapshotStore(s SnapshotStore) Option {
	return func(c *Client) { c.snapStore = s }
}

var _ agent.IncrementalSnapshots = (*Client)(nil)

// IncrementalSnapshots implements agent.IncrementalSnapshots: every
// Snapshot after the first reads only what changed.
func (*Client) IncrementalSnapshots() bool { return true }

// AccountKey is the key of a token's account in a SnapshotStore: a hash
// of the token, never the token.
func AccountKey(token string) string {
	sum := sha256.Sum256([]byte("tidybot todoist account\x00" + token))
	return "todoist-" + hex.EncodeToString(sum[:16])
}

// snapshotTypes are the resources Snapshot reads. The user carries the
// time zone (tz_info), so a run that starts with a snapshot needs no GET
// /user to date its prompt.
var snapshotTypes = []string{"projects", "sections", "labels", "items", "user"}

// maxFullSyncLag is how old a full sync's data (full_sync_date_utc) may be
// before Snapshot follows it with an incremental sync. Todoist says the
// date "should be the same or very close to the current UTC date"; a
// bigger gap means newer objects and updates may be missing
// (developer.todoist.com/api/v1 #tag/Sync/Overview, "Full sync data
// delay"). A read right after a write must see it, so the bound is tight.
const maxFullSyncLag = 2 * time.Second

// snapState is an account's last snapshot: the open objects as of
// SyncToken, tombstones dropped.
type snapState struct {
	SyncToken string        `json:"sync_token"`
	Projects  []syncProject `json:"projects"`
	Sections  []syncSection `json:"sections"`
	Labels    []syncLabel   `json:"labels"`
	Items     []syncItem    `json:"items"`
}

// Snapshot implements agent.Tasks with one /sync. The first read of an
// account is a full sync (sync_token "*"), which Todoist counts against a
// budget of 100 per 15 minutes; every later one sends the last answer's
// sync_token and receives only what changed since, which it merges into
// the snapshot it keeps ("incremental sync",
// developer.todoist.com/api/v1 #tag/Sync/Overview). The kept snapshot is
// saved in the SnapshotStore, when there is one, so a restart does not
// cost a full sync. When a full sync's data is older than it should be
// (full_sync_date_utc), an incremental sync brings it up to date, as
// Todoist advises.
func (c *Client) Snapshot(ctx context.Context) (agent.Snapshot, error) {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	c.loadSnapshot(ctx)
	token := "*"
	if c.snap != nil && c.snap.SyncToken != "" {
		token = c.snap.SyncToken
	}
	r, err := c.syncRead(ctx, token)
	if err != nil && token != "*" && agent.ErrorCodeOf(err) == agent.ErrInvalid {
		// A sync token Todoist no longer takes: read everything again.
		c.log.DebugContext(ctx, "todoist: sync token refused; full sync", slog.Any("err", err))
		token = "*"
		r, err = c.syncRead(ctx, token)
	}
	if err != nil {
		return agent.Snapshot{}, fmt.Errorf("todoist: read everything: %w", err)
	}
	full := c.snap == nil || r.FullSync || token == "*"
	changed := full || len(r.Projects)+len(r.Sections)+len(r.Labels)+len(r.Items) > 0
	user := r.User
	if full {
		s := &snapState{}
		s.apply(r)
		if at, err := time.Parse(time.RFC3339Nano, r.FullSyncDateUTC); err == nil && r.SyncToken != "" && c.now().Sub(at) > maxFullSyncLag {
			inc, err := c.syncRead(ctx, r.SyncToken)
			if err != nil {
				return agent.Snapshot{}, fmt.Errorf("todoist: read the changes since the delayed full sync of %s: %w", r.FullSyncDateUTC, err)
			}
			s.apply(inc)
			if inc.User != nil {
				user = inc.User
			}
		}
		c.snap = s
	} else {
		c.snap.apply(r)
	}
	if user != nil {
		c.setZone(ctx, user.TZInfo.Timezone)
	}
	if changed || c.now().Sub(c.snapSaved) >= snapTouch {
		c.saveSnapshot(ctx)
	}
	return c.snap.agent(), nil
}

// syncRead is one /sync read of snapshotTypes since token.
func (c *Client) syncRead(ctx context.Context, token string) (*syncResponse, error) {
	body, err := json.Marshal(struct {
		SyncToken     string   `json:"sync_token"`
		ResourceTypes []string `json:"resource_types"`
	}{token, snapshotTypes})
	if err != nil {
		return nil, err
	}
	var r syncResponse
	if err := c.do(ctx, call{method: "POST", path: "/sync", body: body}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// apply merges a sync answer into the kept snapshot and drops what is
// deleted, archived or completed.
func (s *snapState) apply(r *syncResponse) {
	s.Projects = slices.DeleteFunc(mergeByID(s.Projects, r.Projects, func(p syncProject) string { return p.ID }),
		func(p syncProject) bool { return p.IsDeleted || p.IsArchived })
	s.Sections = slices.DeleteFunc(mergeByID(s.Sections, r.Sections, func(x syncSection) string { return x.ID }),
		func(x syncSection) bool { return x.IsDeleted || x.IsArchived })
	s.Labels = slices.DeleteFunc(mergeByID(s.Labels, r.Labels, func(l syncLabel) string { return l.ID }),
		func(l syncLabel) bool { return l.IsDeleted })
	s.Items = slices.DeleteFunc(mergeByID(s.Items, r.Items, func(t syncItem) string { return t.ID }),
		func(t syncItem) bool { return t.IsDeleted || t.Checked })
	if r.SyncToken != "" {
		s.SyncToken = r.SyncToken
	}
}

// agent returns the snapshot as the agent sees it, without touching s.
func (s *snapState) agent() agent.Snapshot {
	return snapshotOf(&syncResponse{Projects: slices.Clone(s.Projects), Sections: slices.Clone(s.Sections),
		Labels: slices.Clone(s.Labels), Items: slices.Clone(s.Items)})
}

// loadSnapshot reads the kept snapshot from the store once. Callers hold
// c.snapMu. A snapshot that cannot be read is ignored: the next read is
// a full sync.
func (c *Client) loadSnapshot(ctx context.Context) {
	if c.snapLoaded || c.snapStore == nil {
		return
	}
	c.snapLoaded = true
	data, err := c.snapStore.LoadSnapshot(ctx, AccountKey(c.token))
	if err != nil || data == nil {
		if err != nil {
			c.log.WarnContext(ctx, "todoist: load the kept snapshot", slog.Any("err", err))
		}
		return
	}
	var s snapState
	if err := json.Unmarshal(data, &s); err != nil {
		c.log.WarnContext(ctx, "todoist: decode the kept snapshot", slog.Any("err", err))
		return
	}
	c.snap = &s
}

// saveSnapshot keeps the snapshot in the store. Callers hold c.snapMu. A
// failure costs only a full sync after a restart.
func (c *Client) saveSnapshot(ctx context.Context) {
	if c.snapStore == nil {
		return
	}
	data, err := json.Marshal(c.snap)
	if err == nil {
		err = c.snapStore.SaveSnapshot(context.WithoutCancel(ctx), AccountKey(c.token), data)
	}
	if err != nil {
		c.log.WarnContext(ctx, "todoist: keep the snapshot", slog.Any("err", err))
		return
	}
	c.snapSaved = c.now()
}
