//go:build !lockd_broken_copydigest

package dirfsm

// The deliberately broken build (broken_copydigest.go) is off in every
// normal build.
const brokenCopyDigest = false
