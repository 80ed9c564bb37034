//go:build !lockd_broken_memberbarrier

package lockd

// The deliberately broken build (broken_memberbarrier.go) is off in every
// normal build.
const brokenMemberNoBarrier = false
