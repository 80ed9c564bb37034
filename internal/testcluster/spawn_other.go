//go:build !linux

package testcluster

import "os/exec"

func start(cmd *exec.Cmd) error { return cmd.Start() }
