package main

import (
	"os"
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd's process die with lockbench, so a replica it
// restarted never outlives the run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
