//go:build !lockd_broken_dirdelay

package fsm

const brokenDirDelay = false
