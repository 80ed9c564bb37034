//go:build !lockd_broken_unload

package lockd

// The deliberately broken build (broken_unload.go) is off in every normal
// build.
const brokenSkipsUnloadWait = false
