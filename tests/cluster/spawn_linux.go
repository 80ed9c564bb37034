package cluster

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Processes are started from one goroutine locked to its OS thread for the
// life of the test binary: PR_SET_PDEATHSIG fires when the thread that
// forked the child exits, so the thread must never exit before the process.
// The children then die with the test binary even if it is killed.

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

func start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the binary
			for r := range spawnCh {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd, done}
	return <-done
}
