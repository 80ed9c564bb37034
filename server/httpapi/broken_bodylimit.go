//go:build lockd_broken_bodylimit

package httpapi

// brokenBodyLimit takes a batch-sized body on the batch route from
// anyone: a deliberately broken build (-tags lockd_broken_bodylimit) that
// TestHostileCredentials must catch (issue 22, hole 7). Never set in a
// normal build.
const brokenBodyLimit = true
