//go:build sdk_broken_movedaway

package sdk

// brokenMovedAway makes a held Mutex retry forever, still held, when its
// own cell answers that its node's prefix moved away (the SDK before the
// fix): a deliberately broken build (-tags sdk_broken_movedaway) that
// TestMutexLostWhenItsPrefixMovedAway must catch. Never set in a normal
// build.
const brokenMovedAway = true
