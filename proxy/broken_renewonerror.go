//go:build lockproxy_broken_renewonerror

package proxy

// brokenRenewOnError moves a session's lease base for every item of a
// batch reply but an unauthorized one, as if `unavailable` (an expiry in
// flight) were a renewal: a deliberately broken build (-tags
// lockproxy_broken_renewonerror) that
// TestApplyReplyRenewsOnlyWhatTheLeaderRenewed must catch. Never set in a
// normal build.
const brokenRenewOnError = true
