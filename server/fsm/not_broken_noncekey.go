//go:build !lockd_broken_noncekey

package fsm

const brokenNonceKey = false
