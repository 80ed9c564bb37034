//go:build !lockd_broken_renewexpiring

package session

// brokenRenewExpiring is off in every normal build
// (broken_renewexpiring.go).
const brokenRenewExpiring = false
