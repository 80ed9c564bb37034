//go:build !lockd_broken_secret

package fsm

const brokenSecret = false
