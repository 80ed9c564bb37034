package integration_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestIdleConnectionsCannotStopALockd: connections that send nothing (no
// certificate, no token needed) until the lockd has no file descriptor
// left must not end its API: once they close, it serves again, the same
// process. The descriptor limit is lowered with prlimit so that a few
// hundred connections reach it. Fails on mutant lockd_broken_fdexhaust
// (fasthttp ends Serve on EMFILE, and the lockd exits).
func TestIdleConnectionsCannotStopALockd(t *testing.T) {
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux) to lower the lockd's descriptor limit")
	}
	c := cluster.Start(t, cluster.Options{Replicas: 3})
	const id = 3
	pid := c.PID(id)
	if out, err := exec.Command(prlimit, "--pid", strconv.Itoa(pid), "--nofile=256:256").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for i := 0; i < 400; i++ {
		cn, err := net.DialTimeout("tcp", c.APIAddr(id), time.Second)
		if err != nil {
			break // the listen backlog is full too
		}
		conns = append(conns, cn)
	}
	time.Sleep(2 * time.Second) // the lockd meets EMFILE on accept meanwhile
	t.Logf("%d idle connections held", len(conns))
	for _, cn := range conns {
		cn.Close()
	}
	conns = nil
	var last error
	for attempt := 0; attempt < 100; attempt++ {
		if !c.Running(id) {
			t.Fatalf("lockd %d exited after its descriptors ran out", id)
		}
		if last = healthz(c.APIAddr(id)); last == nil {
			if c.PID(id) != pid {
				t.Fatalf("lockd %d is a new process", id)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("lockd %d does not serve after the idle connections closed: %v", id, last)
}

// healthz asks addr's /healthz once.
func healthz(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+api.RouteHealth, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
