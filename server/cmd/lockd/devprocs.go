package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// devProxyStop bounds the wait for the proxies to stop before the lockds
// are told to.
const devProxyStop = 5 * time.Second

// stopFirst sends SIGTERM to procs and waits, up to limit, for as many
// exits (of any process: the lockds are still running); it returns how
// many it received.
func stopFirst(procs []*exec.Cmd, exits <-chan string, limit time.Duration) int {
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(limit)
	n := 0
	for n < len(procs) {
		select {
		case <-exits:
			n++
		case <-deadline:
			return n
		}
	}
	return n
}

func prefix(w io.Writer, p string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, p+sc.Text())
	}
}

// devProcs are the processes the dev supervisor started, the lockds first,
// then the proxies.
type devProcs struct {
	wg    sync.WaitGroup // the copiers of their output
	procs []*exec.Cmd
	exits chan string // a process's name, when it exits
}

func newDevProcs(n int) *devProcs {
	return &devProcs{exits: make(chan string, n)}
}

// start starts bin with args as name, its output prefixed with [name] on
// stderr. If it cannot start, every process started before gets SIGTERM.
func (s *devProcs) start(name, bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = replicaAttr()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		for _, p := range s.procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		prefix(os.Stderr, "["+name+"] ", out)
	}()
	go func() {
		_ = cmd.Wait()
		s.exits <- name
	}()
	return nil
}

// waitExits waits for alive more exits; past limit it kills every process
// and fails.
func (s *devProcs) waitExits(alive int, limit time.Duration) error {
	deadline := time.After(limit)
	for alive > 0 {
		select {
		case <-s.exits:
			alive--
		case <-deadline:
			for _, p := range s.procs {
				_ = p.Process.Kill()
			}
			s.wg.Wait()
			return fmt.Errorf("replicas did not stop in %v; killed", limit)
		}
	}
	s.wg.Wait()
	return nil
}
