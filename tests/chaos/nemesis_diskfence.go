package chaos

import (
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// A disk fault on every replica is a leader fault of every cell (checker
// h3's fences). While each fsync sleeps slow (expire-in-flight: 1.5 s,
// several election timeouts), a replica's Raft step worker is blocked in
// it: leaders miss their heartbeats and quorum checks, and any cell,
// not only the probes' one, may lose its leader at any time from the
// fault's start until the last slow fsync returns (slow after the
// heal), and then elects one of its own. Its new leader holds writes of
// cached nodes for its cache fence, up to one cache window (by design:
// api.CacheWindow). The probes see only the demo cell's outage; a write
// on another cell (/side) is held by that cell's election and fence,
// which no leader-fault nemesis recorded.

// diskFence is the span a disk fault, from at until healed (the control
// files removed) with fsyncs of slow, lets writes of cached nodes wait:
// the fault, the fsyncs still sleeping after the heal, the election, and
// one cache window after the first commit once every disk is whole
// again (firstCommit: the probes' first acknowledged put started at or
// after healed+slow). Pure.
func diskFence(kind string, at, healed, slow, firstCommit, window time.Duration) check.Window {
	return check.Window{Start: at, End: max(firstCommit, healed+slow) + window, What: "fence after " + kind}
}

// measureDiskFence waits (in the background) for the first commit after
// the disk fault that began at `at` and was healed at healed is over, and
// records its fence (diskFence). Wait on the returned channel. Without a
// commit within the fail-over bound it records nothing: the probes'
// outage is then the cell's, and the liveness checks judge it.
func (n *executor) measureDiskFence(kind string, at, healed, slow time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t0 := time.Now()
		for i := 0; i < 1_000_000 && n.e.ctx.Err() == nil && time.Since(t0) <= n.e.cfg.FailoverBound+slow; i++ {
			if end, ok := n.prober.firstAfter(healed + slow); ok {
				f := diskFence(kind, at, healed, slow, end, api.CacheWindowFor(n.e.cfg.Lease))
				n.mu.Lock()
				n.fences = append(n.fences, f)
				n.mu.Unlock()
				n.logf("chaos: %s: slow disks %v–%v, fence until %v", kind, at.Round(time.Millisecond), healed.Round(time.Millisecond), f.End.Round(time.Millisecond))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return done
}
