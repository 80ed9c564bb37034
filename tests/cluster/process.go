package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Node describes one replica process. Its addresses and directories stay
// the same across restarts.
type Node struct {
	ID       int
	APIAddr  string
	RaftAddr string
	DataDir  string
	LogPath  string
}

type proc struct {
	node Node
	// raftListen is where the lockd binds Raft when a relay stands on
	// node.RaftAddr ("" otherwise).
	raftListen string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil before the first start
	done   chan struct{} // closed when the current process has exited
	paused bool
	starts int
	exit   error
	// extra replaces Options.ReplicaArgs once SetReplicaArgs set it.
	extra []string
}

func (p *proc) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (c *Cluster) args(id int) []string {
	p := c.procs[id-1].node
	args := []string{"serve",
		"--id", fmt.Sprint(id),
		"--data-dir", p.DataDir,
		"--lease", c.opts.Lease.String(),
		"--rtt-ms", fmt.Sprint(c.opts.RTTMillisecond),
		"--logdb", "tiny",
		"--deployment-id", fmt.Sprint(c.deploymentID),
		"--log-level", c.opts.LogLevel,
	}
	for _, q := range c.procs[:c.opts.Replicas] {
		args = append(args, "--peer", fmt.Sprintf("%d,%s,%s", q.node.ID, q.node.RaftAddr, q.node.APIAddr))
	}
	if id > c.opts.Replicas {
		args = append(args, "--raft-addr", p.RaftAddr, "--api-addr", p.APIAddr)
	}
	if l := c.procs[id-1].raftListen; l != "" {
		args = append(args, "--raft-listen", l)
	}
	if c.opts.Zones > 0 {
		args = append(args, "--zone", fmt.Sprintf("z%d", (id-1)%c.opts.Zones+1))
	}
	args = append(args, fmt.Sprintf("--balance-leaders=%v", c.opts.BalanceLeaders))
	for _, cell := range c.opts.Cells {
		spec := fmt.Sprintf("%s,%d,%s", cell.Name, cell.ShardID, strings.Join(cell.Prefixes, "+"))
		if cell.Timing != "" {
			spec += "," + cell.Timing
		}
		args = append(args, "--cell", spec)
	}
	args = append(args, c.tlsArgs()...)
	if c.opts.TLS {
		f := c.opts.tlsRaft
		args = append(args, "--raft-tls-cert", f.Cert, "--raft-tls-key", f.Key, "--raft-tls-ca", f.CA)
	}
	args = append(args, c.opts.ExtraArgs...)
	return append(args, c.replicaArgs(id)...)
}

func (c *Cluster) proc(id int) (*proc, error) {
	if id < 1 || id > len(c.procs) {
		return nil, fmt.Errorf("no replica %d (have 1..%d)", id, len(c.procs))
	}
	return c.procs[id-1], nil
}

// startProc starts p's process; p must not be running.
func (c *Cluster) startProc(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("replica %d is already running", p.node.ID)
	}
	f, err := os.OpenFile(p.node.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== testcluster: start #%d of replica %d at %s\n", p.starts, p.node.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args(p.node.ID)...)
	if c.opts.Network != nil {
		prog, argv := c.opts.Network.Command(p.node.ID, c.bin, c.args(p.node.ID))
		cmd = exec.Command(prog, argv...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.node.DataDir
	if err := start(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start replica %d: %w", p.node.ID, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused, p.exit = cmd, done, false, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== testcluster: replica %d (pid %d) exited at %s: %v\n", p.node.ID, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		p.mu.Lock()
		p.exit = err
		p.mu.Unlock()
		close(done)
	}()
	c.opts.Logf("testcluster: replica %d started (pid %d, api %s)", p.node.ID, cmd.Process.Pid, p.node.APIAddr)
	return nil
}

// waitHealthy waits until p answers /healthz, failing early if it exits.
func (c *Cluster) waitHealthy(ctx context.Context, p *proc) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	url := c.Scheme() + "://" + p.node.APIAddr + "/healthz"
	for attempt := 0; attempt < 10_000; attempt++ {
		select {
		case <-done:
			return fmt.Errorf("replica %d exited before it was healthy: %v\n%s", p.node.ID, p.exitErr(), c.LogTail(p.node.ID, 30))
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := c.http.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %d not healthy: %w", p.node.ID, ctx.Err())
		case <-done:
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("replica %d not healthy after 10000 attempts", p.node.ID)
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}
