package main

import (
	"os"
	"runtime"
	"syscall"
)

// replicaAttr makes a replica die with the dev supervisor, even on kill -9:
// the kernel sends it SIGKILL when the thread that started it exits. That
// is a thread, not the process, so the caller must have locked its
// goroutine to the main OS thread (superviseFromMainThread).
func replicaAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:   true, // Ctrl-C reaches the supervisor only; it stops them in order
		Pdeathsig: syscall.SIGKILL,
	}
}

// superviseFromMainThread pins the calling goroutine (dev's main goroutine)
// to its OS thread for the process's life, so the thread that starts the
// replicas lives exactly as long as the supervisor; and asks for SIGTERM
// when the supervisor's own parent (make, a shell) dies, so that killing
// `make run` stops the cluster too.
func superviseFromMainThread() {
	runtime.LockOSThread()
	ppid := os.Getppid()
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if errno != 0 {
		return
	}
	// The parent may have died before the request: then we were already
	// re-parented and no signal will come.
	if os.Getppid() != ppid {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
