//go:build unix && !linux

package ctl

import "syscall"

// jobAttr puts COMMAND in its own process group; without a parent-death
// signal it outlives a killed lockctl.
func jobAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
