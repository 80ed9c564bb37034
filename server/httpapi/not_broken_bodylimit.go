//go:build !lockd_broken_bodylimit

package httpapi

const brokenBodyLimit = false
