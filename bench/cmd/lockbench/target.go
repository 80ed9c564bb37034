package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The systems lockbench measures. lockd runs every scenario; etcd (through
// its own client and recipes) runs the scenarios both systems serve, with
// the same figures and case names, so two runs line up in a compare.
const (
	targetLockd = "lockd"
	targetEtcd  = "etcd"
)

// etcdScenarios are the scenarios --target etcd runs.
var etcdScenarios = []string{"acquire", "writes", "herd", "sessions"}

// lockdOnlyFlags are run's flags that mean nothing to an etcd cluster.
var lockdOnlyFlags = []string{"via-proxies", "auth", "admin-token", "profile-dir", "proxies", "proxy-park-keepalives", "logdb", "timer-slack-us", "lockd"}

// The stable codes of a refused --target: the first word of the error.
var (
	errUnknownTarget = errors.New("unknown_target")
	errNotOnTarget   = errors.New("not_on_target")
)

// target is the system the scenarios measure, behind the few operations
// they use.
type target interface {
	// lockers opens conns connections and n lockers spread over them. A
	// locker's session (lease) is opened now, outside the measurement.
	lockers(ctx context.Context, conns, n int) ([]locker, func(), error)
	// writers opens conns connections and n writers spread over them.
	writers(ctx context.Context, conns, n int) ([]writer, func(), error)
	// sessions opens n sessions (a client and a lease each, kept alive),
	// at most 32 opens at a time; onOpen, if set, gets each open's latency.
	sessions(ctx context.Context, n int, onOpen func(time.Duration)) ([]heldSession, func(), error)
	// watchEvents is how many watch events the cluster has sent so far
	// (herd's events per release).
	watchEvents(ctx context.Context) (float64, error)
	// keepAlives is how many lease renewals the cluster has served so far.
	keepAlives(ctx context.Context) (float64, error)
	// version is the servers' version, for the run's record.
	version(ctx context.Context) (string, error)
}

// locker takes named locks on its session.
type locker interface {
	// lock blocks until it holds the lock at path; unlock releases it.
	lock(ctx context.Context, path string) (unlock func(context.Context) error, err error)
}

// writer writes values.
type writer interface {
	// put writes value at path (creating what it needs to).
	put(ctx context.Context, path string, value []byte) error
}

// heldSession is one session the sessions scenario holds.
type heldSession interface {
	// lost reports whether the session has ended (a false expiry while
	// the scenario holds it).
	lost() bool
}

// checkTarget refuses a target lockbench does not know, a scenario the
// target does not run and a lockd-only flag given with etcd; set are the
// flags given on the command line.
func checkTarget(name string, scenarios, set []string) error {
	switch name {
	case targetLockd:
		if slices.Contains(set, "etcd") {
			return fmt.Errorf("%w: --etcd is the etcd binary for --target etcd --start", errNotOnTarget)
		}
		return nil
	case targetEtcd:
	default:
		return fmt.Errorf("%w: --target %q (have %s, %s)", errUnknownTarget, name, targetLockd, targetEtcd)
	}
	for _, sc := range scenarios {
		if !slices.Contains(etcdScenarios, sc) {
			return fmt.Errorf("%w: scenario %s runs only against lockd (--target etcd runs %s)", errNotOnTarget, sc, strings.Join(etcdScenarios, ", "))
		}
	}
	for _, f := range lockdOnlyFlags {
		if slices.Contains(set, f) {
			return fmt.Errorf("%w: --%s is a lockd flag; --target etcd has no use for it", errNotOnTarget, f)
		}
	}
	return nil
}

// newTarget is the target the scenarios of e run against, on e's endpoints.
func newTarget(name string, e *env) target {
	if name == targetEtcd {
		return &etcdTarget{endpoints: e.endpoints, lease: e.lease, progress: e.progress}
	}
	return &lockdTarget{e: e}
}

// changedFlags are the names of the flags given on cmd's command line.
func changedFlags(cmd *cobra.Command) []string {
	var out []string
	cmd.Flags().Visit(func(f *pflag.Flag) { out = append(out, f.Name) })
	return out
}
