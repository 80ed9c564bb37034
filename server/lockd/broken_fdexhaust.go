//go:build lockd_broken_fdexhaust

package lockd

// brokenFDExhaust serves the API on the bare listener, whose accept ends
// the server when file descriptors run out: a deliberately broken build
// (-tags lockd_broken_fdexhaust) that TestIdleConnectionsCannotStopALockd
// must catch. Never set in a normal build.
const brokenFDExhaust = true
