//go:build !linux

package main

import (
	"os"
	"os/exec"
)

// dieWithParent: only Linux has a parent-death signal; elsewhere the
// restarted replica is killed when the run ends (atExit).
func dieWithParent(*exec.Cmd) {}

func fdatasync(f *os.File) error { return f.Sync() }
