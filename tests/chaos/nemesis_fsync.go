package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// FsyncControlEnv is lockd's fsync fault control (server/lockd/faults_on.go,
// built with -tags lockd_faults): a path with "{id}" for the lockd's id.
const FsyncControlEnv = "LOCKD_FAULT_FSYNC"

// fsyncFile is lockd id's control file.
func (n *executor) fsyncFile(id int) string {
	return filepath.Join(n.fsyncDir, fmt.Sprintf("fsync-%d", id))
}

// setFsync writes (or with mode "", removes) the control file of each id.
func (n *executor) setFsync(mode string, ids ...int) error {
	for _, id := range ids {
		var err error
		if mode == "" {
			err = os.Remove(n.fsyncFile(id))
			if os.IsNotExist(err) {
				err = nil
			}
		} else {
			err = os.WriteFile(n.fsyncFile(id), []byte(mode+"\n"), 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// slowFsync makes every fsync of the leader and two followers (a
// majority: nothing commits faster than their disks) sleep 0.2–1.5 s for
// the hold: proposals time out while their entries may still commit
// (finding 5: a write whose proposal timed out must not leave a stale
// cache; the config workers' cached reads are checked by c). Then heals.
type slowFsync struct{}

func (slowFsync) Kind() FaultKind { return SlowFsync }
func (slowFsync) Needs() []need   { return []need{needFaultsBuild, needLeader} }

func (slowFsync) Inject(ctx context.Context, n *executor, st Step, on target) error {
	leader := on.leader
	victims := append(n.pick(st, 2, without(n.c.IDs(), leader)), leader)
	slow := time.Duration(200+st.Pick%1300) * time.Millisecond
	if err := n.setFsync(fmt.Sprintf("slow %v", slow), victims...); err != nil {
		return err
	}
	n.count(st.Label())
	n.logf("chaos: slow-fsync: %v on lockds %v (leader %d) for %v", slow, victims, leader, st.Hold)
	sleepCtx(ctx, st.Hold)
	return n.setFsync("", victims...)
}

// failFsync makes a replica's fsyncs fail (the leader's on even picks): a
// lockd must stop rather than go on with a log it could not persist
// (dragonboat panics on a LogDB error). The nemesis expects the exit, and
// records it if the replica went on; the replica is restarted after the
// hold with its disk healthy again.
type failFsync struct{}

func (failFsync) Kind() FaultKind { return FailFsync }
func (failFsync) Needs() []need   { return []need{needFaultsBuild, needLeader} }

func (failFsync) Inject(ctx context.Context, n *executor, st Step, on target) error {
	leader := on.leader
	victim := leader
	if st.Pick%2 == 1 {
		victim = n.pick(st, 1, without(n.c.IDs(), leader))[0]
	}
	n.down[victim] = true // its exit is expected, not a crash
	if err := n.setFsync("fail", victim); err != nil {
		return err
	}
	at := n.e.h.Now()
	n.count(st.Label())
	var measured <-chan struct{}
	if victim == leader {
		measured = n.measureFailover(string(st.Kind), at)
	}
	exited := false
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		if !n.c.Running(victim) {
			exited = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.e.h.AddOutcome(fmt.Sprintf("fail-fsync: replica exited within 10 s: %v", exited))
	n.logf("chaos: fail-fsync on lockd %d (leader %d): exited %v", victim, leader, exited)
	sleepCtx(ctx, st.Hold)
	err := n.setFsync("", victim)
	if n.c.Running(victim) {
		_ = n.c.Kill(victim)
	}
	if measured != nil {
		<-measured
	}
	return joinErr(err, n.restart(victim))
}

func joinErr(errs ...error) error {
	errs = slices.DeleteFunc(errs, func(e error) bool { return e == nil })
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%v", errs)
}

// expiringLock is the lock of the expire-in-flight nemesis's holder.
const expiringLock = basePath + "/expiring"

// expireInFlight lets a session's expiry be in flight when its client
// speaks again (finding 6): a holder process (through the proxies when
// they run) is first stopped for half its lease (it must keep its
// session), then for its lease; just before the leader expires it,
// every replica's fsync becomes slow, so that the expire_session entry
// takes seconds to commit; the holder is resumed inside that window, and
// its KeepAlive reaches the leader while the expiry is pending (answered
// unavailable, which must not renew it). The holder reports its lease
// claims and the expiry (checker m3).
type expireInFlight struct{}

func (expireInFlight) Kind() FaultKind { return ExpireInFlight }
func (expireInFlight) Needs() []need   { return []need{needFaultsBuild} }

func (expireInFlight) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	h, name, err := n.grantedHolder("expiring-holder", expiringLock)
	if err != nil {
		return err
	}
	defer func() { _ = h.kill() }()
	lease := n.e.cfg.Lease
	// First a pause under the lease (half of it; with its KeepAlive
	// interval, a third, the session is silent at most 5/6 of it): the
	// session must live on, and a leader that expires it early tells the
	// resumed holder so before the lease it was given ends (checker m3).
	sleepCtx(ctx, 300*time.Millisecond)
	if err := h.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	sleepCtx(ctx, lease/2)
	if err := h.signal(syscall.SIGCONT); err != nil {
		return err
	}
	sleepCtx(ctx, lease/3+300*time.Millisecond)
	if !h.running() {
		n.logf("chaos: expire-in-flight: %s ended after a pause of half its lease", name)
		return nil
	}
	if err := h.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.count(st.Label())
	sleepCtx(ctx, lease-300*time.Millisecond)
	slow := 1500 * time.Millisecond // all replicas: more is an outage
	if err := n.setFsync(fmt.Sprintf("slow %v", slow), n.c.IDs()...); err != nil {
		_ = h.signal(syscall.SIGCONT)
		return err
	}
	slowAt := n.e.h.Now()
	// The proxy renews for a while after its client falls silent: the
	// leader decides the expiry up to a second or so after the lease.
	sleepCtx(ctx, 700*time.Millisecond+time.Duration(st.Pick%1000)*time.Millisecond)
	_ = h.signal(syscall.SIGCONT)
	sleepCtx(ctx, 2*slow)
	err = n.setFsync("", n.c.IDs()...)
	// Slow disks on every replica are a leader fault of every cell: its
	// fence excuses writes of cached nodes (checker h3, diskFence).
	fenced := n.measureDiskFence(st.Label(), slowAt, n.e.h.Now(), slow)
	select {
	case <-h.done:
	case <-time.After(lease):
	}
	<-fenced
	until, lost := h.lease()
	n.logf("chaos: expire-in-flight: %s resumed; its last lease until %v, lost at %v, running %v", name, until.Round(time.Millisecond), lost.Round(time.Millisecond), h.running())
	return err
}
