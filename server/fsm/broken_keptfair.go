//go:build lockd_broken_keptfair

package fsm

// brokenKeptFair drops the per-tenant bound on the lock-delays a cell
// keeps for deleted lock directories, so one tenant can fill the cell's
// table and stop every other tenant deleting its lock directories in
// delay: a deliberately broken build (-tags lockd_broken_keptfair) that
// TestDeletedLockDelaysPerTenant must catch. Never set in a normal build.
const brokenKeptFair = true
