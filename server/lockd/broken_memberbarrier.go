//go:build lockd_broken_memberbarrier

package lockd

// brokenMemberNoBarrier makes a membership change whose request failed
// read the group's membership at once, without first committing an entry
// after it: a change still in flight then reads as not made, is recorded
// as aborted, and commits after. A deliberately broken build (-tags
// lockd_broken_memberbarrier) that TestMemberVerdict must catch. Never set
// in a normal build.
const brokenMemberNoBarrier = true
