//go:build !lockproxy_broken_lendtoken

package sdk

const brokenLendToken = false
