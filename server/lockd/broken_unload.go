//go:build lockd_broken_unload

package lockd

// brokenSkipsUnloadWait makes a lockd start a replica's next incarnation
// without waiting for the stopped one to unload (dragonboat then panics
// "from two incarnations found"). A deliberately broken build (-tags
// lockd_broken_unload) that TestReAddReplicaOnSameLockd must catch. Never
// set in a normal build.
const brokenSkipsUnloadWait = true
