//go:build lockd_broken_copydigest

package dirfsm

// brokenCopyDigest commits a migration whatever its copy: the commit
// skips the comparison with the sealed source's count and digest. A
// deliberately broken build (-tags lockd_broken_copydigest) that
// TestMigrationCopyVerified must catch. Never set in a normal build.
const brokenCopyDigest = true
