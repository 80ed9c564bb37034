package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestTakeoverAfterHolderKilled: a separate holder process (lockctl lock …
// -- sleep) is killed with SIGKILL; the next waiter holds the lock within
// the lease plus a margin. Spec: < 15 s with the 12 s lease; this measures
// it with that lease and production Raft timing.
func TestTakeoverAfterHolderKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("takes a full 12 s lease")
	}
	const lease = 12 * time.Second
	c := cluster.Start(t, cluster.Options{RTTMillisecond: 100, Lease: lease})
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")

	holder := exec.Command(lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "lock", "/demo/takeover/lock", "--", "sh", "-c", `echo "token=$LOCK_TOKEN job=$$"; exec sleep 600`)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := holder.StdoutPipe()
	must(t, err)
	must(t, holder.Start())
	defer func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var token, job int
	if err == nil {
		_, err = fmt.Sscanf(line, "token=%d job=%d", &token, &job)
	}
	if err != nil {
		t.Fatalf("holder printed %q: %v", line, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waiter := newSDK(t, c, lease).NewMutex("/demo/takeover/lock")
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
		}
		granted <- time.Now()
	}()
	waitChildren(t, newSDK(t, c, lease), "/demo/takeover/lock", 2)

	// kill -9 lockctl: its KeepAlives stop, and its job (in a process
	// group of its own) must die with it rather than act without the lock.
	killed := time.Now()
	must(t, syscall.Kill(-holder.Process.Pid, syscall.SIGKILL))
	defer func() { _ = syscall.Kill(job, syscall.SIGKILL) }()
	took := (<-granted).Sub(killed)
	t.Logf("takeover after the holder's kill -9: %v (lease %v)", took.Round(time.Millisecond), lease)
	// The lease runs from the holder's last KeepAlive receipt, up to lease/3
	// before the kill; a grant much sooner than that would be a safety bug.
	if took < lease/2 || took > 3*lease {
		t.Fatalf("takeover took %v with a %v lease", took, lease)
	}
	if api.TokenIndex(waiter.Token()) == 0 {
		t.Fatal("no token")
	}
	// The job was killed at once (parent-death signal): long gone by now.
	if err := syscall.Kill(job, 0); err == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", job)); !strings.Contains(string(st), ") Z ") {
			t.Fatalf("job %d of the killed lockctl is still running", job)
		}
	}
}
