//go:build !lockproxy_broken_lendtoken

package chaos

const brokenLendTokenBuild = false
