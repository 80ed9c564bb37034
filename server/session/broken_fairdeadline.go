//go:build lockd_broken_fairdeadline

package session

// brokenFairDeadline holds every passed invalidation deadline against
// the session, even one that left its client no time to answer (queued
// just before it): honest, connected cachers are then refused. A
// deliberately broken build (-tags lockd_broken_fairdeadline) that
// TestInvalidationDeadline's unfair cases must catch. Never set in a
// normal build.
const brokenFairDeadline = true
