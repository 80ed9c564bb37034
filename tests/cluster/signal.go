package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// signal sends sig to the running process of replica id, by PID. It returns
// the channel closed on exit, or nil if the replica is not running.
func (c *Cluster) signal(id int, sig syscall.Signal) (<-chan struct{}, error) {
	p, err := c.proc(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil, nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("signal %v to replica %d (pid %d): %w", sig, id, p.cmd.Process.Pid, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL: // a killed process is no longer paused
		p.paused = false
	}
	return p.done, nil
}

func waitDone(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill sends SIGKILL to replica id and waits for it to exit. Killing a
// replica that is not running does nothing.
func (c *Cluster) Kill(id int) error {
	done, err := c.signal(id, syscall.SIGKILL)
	if err != nil || done == nil {
		return err
	}
	if !waitDone(done, 10*time.Second) {
		return fmt.Errorf("replica %d did not exit 10s after SIGKILL", id)
	}
	c.opts.Logf("testcluster: replica %d killed", id)
	return nil
}

// Stop sends SIGTERM to replica id (resuming it first if paused) and waits
// for it to exit; after 20s it is killed. Stopping a replica that is not
// running does nothing.
func (c *Cluster) Stop(id int) error {
	p, err := c.proc(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused {
		if err := c.Resume(id); err != nil {
			return err
		}
	}
	done, err := c.signal(id, syscall.SIGTERM)
	if err != nil || done == nil {
		return err
	}
	if !waitDone(done, 20*time.Second) {
		c.opts.Logf("testcluster: replica %d ignored SIGTERM for 20s; killing it", id)
		if err := c.Kill(id); err != nil {
			return err
		}
		return fmt.Errorf("replica %d did not stop within 20s of SIGTERM (killed)", id)
	}
	c.opts.Logf("testcluster: replica %d stopped (%v)", id, p.exitErr())
	return nil
}

// Restart starts replica id again with the same data directory and ports,
// stopping it first (SIGTERM) if it runs, and waits until it answers
// /healthz. It does not wait for it to catch up or for leaders.
func (c *Cluster) Restart(id int) error {
	p, err := c.proc(id)
	if err != nil {
		return err
	}
	if err := c.Stop(id); err != nil {
		return err
	}
	if err := c.startProc(p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	return c.waitHealthy(ctx, p)
}

// Pause stops replica id with SIGSTOP: it keeps its sockets but answers
// nothing until Resume.
func (c *Cluster) Pause(id int) error {
	done, err := c.signal(id, syscall.SIGSTOP)
	if err == nil && done == nil {
		err = fmt.Errorf("replica %d is not running", id)
	}
	if err == nil {
		c.opts.Logf("testcluster: replica %d paused", id)
	}
	return err
}

// Resume continues a paused replica with SIGCONT.
func (c *Cluster) Resume(id int) error {
	done, err := c.signal(id, syscall.SIGCONT)
	if err == nil && done == nil {
		err = fmt.Errorf("replica %d is not running", id)
	}
	if err == nil {
		c.opts.Logf("testcluster: replica %d resumed", id)
	}
	return err
}

// StopAll stops every replica at once (SIGTERM, in parallel).
func (c *Cluster) StopAll() error {
	return c.each(c.Stop)
}

// KillAll kills every replica at once.
func (c *Cluster) KillAll() error {
	return c.each(c.Kill)
}

// StartAll starts every replica that is not running, in parallel, and waits
// until each answers /healthz (not for leaders: see WaitLeaders).
func (c *Cluster) StartAll() error {
	return c.each(func(id int) error {
		if c.Running(id) {
			return nil
		}
		return c.Restart(id)
	})
}

func (c *Cluster) each(f func(id int) error) error {
	errs := make([]error, len(c.procs))
	var wg sync.WaitGroup
	for i := range c.procs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = f(i + 1)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}
