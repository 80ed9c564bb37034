//go:build lockd_faults

package lockd

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/vfs"
)

// FaultsBuild says this lockd was built with -tags lockd_faults: the
// fault suite's build, never a production one.
const FaultsBuild = true

// faultFsyncEnv names the fault suite's control file for fsync faults:
// while the file exists, every fsync of the NodeHost's files (the Raft
// log, its metadata, snapshots) obeys its one line, "slow DURATION"
// (sleep, then sync) or "fail" (return an error without syncing). "{id}"
// in the path stands for this lockd's id, so that one environment serves
// every lockd of a test cluster.
const faultFsyncEnv = "LOCKD_FAULT_FSYNC"

// faultRecheck is how often a Sync looks at the control file again.
const faultRecheck = 20 * time.Millisecond

// errFaultFsync is the error an injected fsync failure returns.
var errFaultFsync = errors.New("lockd_faults: injected fsync failure")

// withFaults wraps the NodeHost's filesystem in the fsync fault injector
// when the environment names a control file, and returns what the
// lockd's fsync probe runs before its own sync (so that its figure shows
// the injected disk), or nil.
func withFaults(nhc *config.NodeHostConfig, replicaID uint64) func() error {
	path := os.Getenv(faultFsyncEnv)
	if path == "" {
		return nil
	}
	path = strings.ReplaceAll(path, "{id}", strconv.FormatUint(replicaID, 10))
	fs := nhc.Expert.FS
	if fs == nil {
		fs = vfs.Default
	}
	// dragonboat's LogDB refuses any FS but its default and vfs.ErrorFS
	// ("invalid fs"); with an ErrorFS its step workers recover an error
	// panic and stop, so a failed fsync freezes the replica (the process
	// lives) where a real one would panic and exit.
	ctl := &faultControl{path: path}
	nhc.Expert.FS = vfs.Wrap(fs, ctl)
	fmt.Fprintf(os.Stderr, "lockd_faults: fsync faults follow %s\n", path)
	return ctl.before
}

// faultControl is the control file's last reading, refreshed at most every
// faultRecheck.
type faultControl struct {
	path string
	mu   sync.Mutex
	at   time.Time
	mode string // "", "slow", "fail"
	slow time.Duration
	hits atomic.Uint64
}

// current reads the control file (at most every faultRecheck).
func (c *faultControl) current() (string, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < faultRecheck {
		return c.mode, c.slow
	}
	c.at = time.Now()
	mode, slow := parseFaultControl(c.path)
	if mode != c.mode || slow != c.slow {
		fmt.Fprintf(os.Stderr, "lockd_faults: fsync mode %q (slow %v) after %d faulted syncs\n", mode, slow, c.hits.Load())
	}
	c.mode, c.slow = mode, slow
	return mode, slow
}

// parseFaultControl reads one control file: absent or unreadable is no
// fault.
func parseFaultControl(path string) (string, time.Duration) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0
	}
	f := strings.Fields(string(b))
	switch {
	case len(f) >= 1 && f[0] == "fail":
		return "fail", 0
	case len(f) >= 2 && f[0] == "slow":
		if d, err := time.ParseDuration(f[1]); err == nil && d > 0 {
			return "slow", min(d, time.Minute)
		}
	}
	return "", 0
}

// before is run ahead of every Sync: it sleeps or fails as the control
// file says.
func (c *faultControl) before() error {
	switch mode, slow := c.current(); mode {
	case "slow":
		c.hits.Add(1)
		time.Sleep(slow)
	case "fail":
		c.hits.Add(1)
		return errFaultFsync
	}
	return nil
}

// MaybeError is the injector dragonboat's error FS (vfs.ErrorFS, the only
// wrapper its LogDB accepts besides the default FS) calls before every
// operation: a Sync obeys the control file, everything else goes through.
func (c *faultControl) MaybeError(op vfs.Op) error {
	if op != vfs.OpSync {
		return nil
	}
	return c.before()
}
