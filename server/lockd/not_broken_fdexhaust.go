//go:build !lockd_broken_fdexhaust

package lockd

const brokenFDExhaust = false
