//go:build !lockd_broken_acl

package httpapi

const brokenACL = false
