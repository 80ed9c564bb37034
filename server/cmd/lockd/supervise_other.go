//go:build !linux

package main

import "syscall"

// Without a parent-death signal, replicas outlive a killed supervisor.
func replicaAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func superviseFromMainThread() {}
