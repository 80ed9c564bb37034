//go:build !linux

package cluster

import "os/exec"

func start(cmd *exec.Cmd) error { return cmd.Start() }
