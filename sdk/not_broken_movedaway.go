//go:build !sdk_broken_movedaway

package sdk

const brokenMovedAway = false
