package api

// Fencing tokens.
//
// A token is a uint64: the prefix's directory epoch in the high TokenEpochBits
// bits, the Raft index at which the holder's node was created in the low
// TokenIndexBits bits. Within one cell the index only grows (across leader
// changes and restarts: it is the log position). A prefix migration bumps the
// epoch, so every token the new cell issues compares above every token the
// old cell issued; so does a restore from backup (its log resumes at the
// backup's index, below tokens the lost cell issued after it). Resources
// compare tokens as plain integers.
//
// Neither part may wrap: a cell refuses (CodeTokenExhausted) a lock create
// at an index over MaxTokenIndex and a directory epoch over MaxTokenEpoch.
// The top bit stays clear, so a token also fits a signed 64-bit column
// (SQL BIGINT) without going negative.
const (
	TokenIndexBits = 40 // 1.1e12 entries: ~17 years at 2 000 writes/s
	TokenEpochBits = 64 - TokenIndexBits
	tokenIndexMask = 1<<TokenIndexBits - 1
	// MaxTokenIndex is the last Raft index at which a lock node can be created.
	MaxTokenIndex = tokenIndexMask
	// MaxTokenEpoch is the highest directory epoch: one bit below the
	// epoch field's width, so that every token is below 2^63.
	MaxTokenEpoch = 1<<(TokenEpochBits-1) - 1
)

// MakeToken builds the token for a node created at index under epoch.
func MakeToken(epoch, index uint64) uint64 {
	return epoch<<TokenIndexBits | index&tokenIndexMask
}

// TokenEpoch is the directory epoch of a token.
func TokenEpoch(t uint64) uint64 { return t >> TokenIndexBits }

// TokenIndex is the create index of a token's node.
func TokenIndex(t uint64) uint64 { return t & tokenIndexMask }
