//go:build !lockd_faults

package lockd

import "github.com/lni/dragonboat/v4/config"

// FaultsBuild is false in every normal build: the fsync fault injector
// (faults_on.go, -tags lockd_faults) is the fault suite's alone.
const FaultsBuild = false

// withFaults does nothing in a normal build.
func withFaults(*config.NodeHostConfig, uint64) func() error { return nil }
