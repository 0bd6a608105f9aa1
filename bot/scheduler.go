package bot

import (
	"context"
	"slices"
	"sync"
)

// scheduler hands jobs to workers: one job per thread at a time, a
// thread's jobs in order, threads first come first served, except
// that a thread whose work waited for a holder goes first (addIn).
type scheduler struct {
	// mu protects the fields below.
	mu      sync.Mutex
	queues  map[string][]Job // per thread, in order
	active  map[string]bool  // threads with queued or running work
	ready   []string         // threads with work and no worker
	running int              // jobs handed out and not done
	stopped bool
	// lead counts the threads at the head of ready that were queued
	// first (addIn), none of whose jobs a worker has taken yet.
	lead int
	// started, when set, is called after a worker took the first job of
	// a thread queued first.
	started func()
	// epoch counts the losses of this process's leases (drop); handed
	// is the epoch at which each running thread's job was handed out: a
	// job of an earlier epoch is stale, its thread perhaps another
	// process's now.
	epoch  uint64
	handed map[string]uint64
	// changed is closed and replaced whenever the state changes, waking
	// every waiter (next, waitIdle).
	changed chan struct{}
	// refill, when set (a Shared store), is asked for more of a thread's
	// work when its queue runs out, before the thread goes idle; epoch is
	// the one its job was handed out in.
	refill func(key string, epoch uint64) []Job
}

func newScheduler() *scheduler {
	return &scheduler{queues: map[string][]Job{}, active: map[string]bool{}, handed: map[string]uint64{}, changed: make(chan struct{})}
}

// broadcast wakes every waiter; mu must be held.
func (s *scheduler) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// add queues j for its thread; front puts it before the thread's other
// jobs (a resumed run goes before new messages).
func (s *scheduler) add(j Job, front bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if front {
		s.queues[j.ThreadKey] = append([]Job{j}, s.queues[j.ThreadKey]...)
	} else {
		s.queues[j.ThreadKey] = append(s.queues[j.ThreadKey], j)
	}
	if !s.active[j.ThreadKey] {
		s.active[j.ThreadKey] = true
		s.ready = append(s.ready, j.ThreadKey)
	}
	s.broadcast()
}

// next waits for a job whose thread has no job running and hands it out;
// the caller reports it with done. ok is false once the scheduler stops
// or ctx ends.
func (s *scheduler) next(ctx context.Context) (j Job, ok bool) {
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return Job{}, false
		}
		if len(s.ready) > 0 {
			key := s.ready[0]
			s.ready = s.ready[1:]
			j := s.queues[key][0]
			s.queues[key] = s.queues[key][1:]
			s.running++
			s.handed[key] = s.epoch
			led := s.lead > 0
			if led {
				s.lead--
			}
			started := s.started
			s.mu.Unlock()
			if led && started != nil {
				started()
			}
			return j, true
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Job{}, false
		case <-changed:
		}
	}
}

// done reports that the job handed out for thread key is handled: the
// thread's next job becomes ready, or the thread goes idle.
func (s *scheduler) done(key string) {
	s.mu.Lock()
	epoch := s.handed[key]
	if len(s.queues[key]) == 0 && !s.stopped && s.refill != nil && epoch == s.epoch {
		// Still counted as running, so waitIdle does not see a gap.
		s.mu.Unlock()
		more := s.refill(key, epoch)
		s.mu.Lock()
		if epoch == s.epoch { // else the leases were lost meanwhile
			s.queues[key] = append(s.queues[key], more...)
		}
	}
	defer s.mu.Unlock()
	delete(s.handed, key)
	s.running--
	if len(s.queues[key]) > 0 && !s.stopped {
		s.ready = append(s.ready, key)
	} else {
		delete(s.active, key)
		delete(s.queues, key)
	}
	s.broadcast()
}

// addIn queues jobs for their threads, unless the epoch is no longer
// epoch (they were read under leases since lost); it reports whether it
// did. With first, a thread not queued yet goes before every thread
// that is, after those queued first before it: its work has waited
// already (see feeder.fill).
func (s *scheduler) addIn(epoch uint64, jobs []Job, first bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch {
		return false
	}
	for _, j := range jobs {
		s.queues[j.ThreadKey] = append(s.queues[j.ThreadKey], j)
		if s.active[j.ThreadKey] {
			continue
		}
		s.active[j.ThreadKey] = true
		if first {
			s.ready = slices.Insert(s.ready, s.lead, j.ThreadKey)
			s.lead++
		} else {
			s.ready = append(s.ready, j.ThreadKey)
		}
	}
	s.broadcast()
	return true
}

// leading returns how many threads queued first wait for a worker.
func (s *scheduler) leading() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lead
}

// drop begins a new epoch after the leases were lost: queued jobs are
// forgotten (they stay stored, for whoever leases their thread), and
// the running ones are stale.
func (s *scheduler) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	s.ready = nil
	s.lead = 0
	for key := range s.queues {
		s.queues[key] = nil
	}
	for key := range s.active {
		if _, running := s.handed[key]; !running {
			delete(s.active, key)
			delete(s.queues, key)
		}
	}
	s.broadcast()
}

// stale reports whether the job running for thread key was handed out
// before the leases were last lost.
func (s *scheduler) stale(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.handed[key]
	return ok && e != s.epoch
}

// epochNow returns the current epoch.
func (s *scheduler) epochNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// stop makes next return false; queued jobs stay in the store for the
// next start.
func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.broadcast()
}

// waitIdle blocks until no job is queued or running, or ctx ends. After
// stop, queued jobs that no worker will take do not count.
func (s *scheduler) waitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		quiet := s.running == 0 && (len(s.active) == 0 || s.stopped)
		changed := s.changed
		s.mu.Unlock()
		if quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// expect counts work about to be added (a conversation being leased and
// read, see feeder.offer) as running, so that waitIdle waits for it;
// settle ends that count.
func (s *scheduler) expect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running++
}

func (s *scheduler) settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.broadcast()
}

// inFlight reports how many jobs are running and queued.
func (s *scheduler) inFlight() (running, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		queued += len(q)
	}
	return s.running, queued
}
