//go:build !lockd_broken_parentsfrom

package fsm

const brokenParentsFrom = false
