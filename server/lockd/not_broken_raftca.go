//go:build !lockd_broken_raftca

package lockd

// The deliberately broken build (broken_raftca.go) is off in every
// normal build.
const brokenRaftCA = false
