//go:build lockd_broken_renewexpiring

package session

// brokenRenewExpiring makes Renew and RenewBatch renew a lease whose
// expiry is in flight instead of answering unavailable: the client is
// told its session is safe while the expiry commits (issue 23, finding
// 6, on the leader's side). A deliberately broken build (-tags
// lockd_broken_renewexpiring) that the fault suite's checker m3 (no
// SessionSafe after the expiry committed) must catch. Never set in a
// normal build.
const brokenRenewExpiring = true
