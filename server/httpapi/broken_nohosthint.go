//go:build lockd_broken_nohosthint

package httpapi

// brokenNoHostHint refuses a request for a cell this lockd does not host
// with wrong_cell, naming no replica that does: a client whose view of the
// cell's replicas predates a restore or a membership change fails instead
// of following the hint. A deliberately broken build (-tags
// lockd_broken_nohosthint) that TestNotHostedCellNamesAReplica must
// catch. Never set in a normal build.
const brokenNoHostHint = true
