//go:build !lockd_broken_fairdeadline

package session

const brokenFairDeadline = false
