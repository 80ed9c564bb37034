package cell

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// lockDelays times the end of each lock directory's lock-delay. Every
// replica notes, on its monotonic clock, when it applied each unclean
// release (an entry applies no earlier than it committed, so a delay
// timed from there is never shorter than from the release). The leader
// ends a delay by committing end_lock_delay once it has run: from its own
// apply of the release, or, for a release it did not apply (it was
// restored from a snapshot after it), from its own leader start. Soft
// state beside the state machine: the state holds only the delay itself.
type lockDelays struct {
	log *slog.Logger
	// end commits end_lock_delay for dir's delay that began at since.
	end func(ctx context.Context, dir string, since uint64) error

	mu      sync.Mutex
	applied map[string]appliedRelease // by lock directory: the latest release this replica applied
	timers  map[string]*time.Timer    // leader only: the end of each delay
	lead    uint64                    // the leadership the timers belong to; 0 when not leading
	stopped chan struct{}             // closed when that leadership ends
	wg      sync.WaitGroup
}

type appliedRelease struct {
	since uint64
	at    time.Time // this replica's monotonic clock at the apply
}

func newLockDelays(log *slog.Logger, end func(ctx context.Context, dir string, since uint64) error) *lockDelays {
	return &lockDelays{log: log, end: end, applied: map[string]appliedRelease{}, timers: map[string]*time.Timer{}}
}

// released notes that this replica applied the release that put dir in
// delay at index since; on the leader it also times the delay's end.
func (d *lockDelays) released(dir string, since uint64, ms int64, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applied[dir] = appliedRelease{since: since, at: now}
	if d.lead != 0 {
		d.scheduleLocked(dir, since, now.Add(time.Duration(ms)*time.Millisecond))
	}
}

// ended forgets dir's delay once its end applied.
func (d *lockDelays) ended(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.applied, dir)
	if t := d.timers[dir]; t != nil {
		t.Stop()
		delete(d.timers, dir)
	}
}

// start begins timing every delay in the state for the leadership epoch
// that applied its leader_start at now.
func (d *lockDelays) start(epoch uint64, delays []fsm.LockDelay, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	d.lead = epoch
	d.stopped = make(chan struct{})
	for _, l := range delays {
		end := inheritedEnd(l, d.applied[l.Dir], now)
		if mutant.On(mutant.LockDelayLostOnFailover) {
			end = now
		}
		d.scheduleLocked(l.Dir, l.Since, end)
	}
}

// inheritedEnd is when a new leader that started at now ends a delay it
// inherited: a full delay from its own apply of the release that began
// it, or, if it did not apply that release, from its own start.
func inheritedEnd(l fsm.LockDelay, applied appliedRelease, now time.Time) time.Time {
	from := now
	if applied.since == l.Since && !applied.at.IsZero() {
		from = applied.at
	}
	return from.Add(time.Duration(l.MS) * time.Millisecond)
}

// stop ends the timing when leadership ends; the next leader times anew.
func (d *lockDelays) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
}

func (d *lockDelays) stopLocked() {
	for dir, t := range d.timers {
		t.Stop()
		delete(d.timers, dir)
	}
	if d.lead != 0 {
		close(d.stopped)
	}
	d.lead = 0
}

// wait waits for the end proposals in flight (the cell is closing).
func (d *lockDelays) wait() { d.wg.Wait() }

func (d *lockDelays) scheduleLocked(dir string, since uint64, at time.Time) {
	if t := d.timers[dir]; t != nil {
		t.Stop()
	}
	lead, stopped := d.lead, d.stopped
	d.timers[dir] = time.AfterFunc(time.Until(at), func() {
		d.mu.Lock()
		if d.lead != lead {
			d.mu.Unlock()
			return
		}
		d.wg.Add(1)
		d.mu.Unlock()
		defer d.wg.Done()
		d.commitEnd(dir, since, stopped)
	})
}

// commitEnd proposes the end until it commits, the leadership ends, or
// the state says there is nothing to end.
func (d *lockDelays) commitEnd(dir string, since uint64, stopped <-chan struct{}) {
	for attempt := 0; attempt < 600; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := d.end(ctx, dir, since)
		cancel()
		if err == nil {
			d.log.Info("lock-delay ended", "lock", dir, "release_index", since)
			return
		}
		if code := api.CodeOf(err); code != api.CodeUnavailable {
			d.log.Warn("lock-delay end not committed", "lock", dir, "release_index", since, "err", err)
			return // not leading any more: the next leader times it
		}
		select {
		case <-stopped:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
