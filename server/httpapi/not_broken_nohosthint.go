//go:build !lockd_broken_nohosthint

package httpapi

const brokenNoHostHint = false
