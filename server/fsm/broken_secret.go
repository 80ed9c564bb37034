//go:build lockd_broken_secret

package fsm

// brokenSecret makes the state machine take any secret for a session: a
// deliberately broken build (-tags lockd_broken_secret) that
// TestSessionSecret and TestTenantsACLsAndQuotas must catch. Never set
// in a normal build.
const brokenSecret = true
