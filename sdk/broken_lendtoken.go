//go:build lockproxy_broken_lendtoken

package sdk

// brokenLendToken makes Forward send the client's own token when the
// proxy's client sent none (hole 1 of issue 22): a deliberately broken
// build (-tags lockproxy_broken_lendtoken) that TestHostileCredentials
// must catch. Never set in a normal build.
const brokenLendToken = true
