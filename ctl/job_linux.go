package ctl

import "syscall"

// jobAttr puts COMMAND in its own process group (signalled as one) and has
// the kernel SIGKILL it if lockctl dies first, even by kill -9: a job whose
// lockctl is gone can no longer learn that the lock was lost. The signal is
// tied to the thread that started it, so the caller locks its goroutine to
// that thread while the job runs.
func jobAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
