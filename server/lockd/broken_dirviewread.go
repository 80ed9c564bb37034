//go:build lockd_broken_dirviewread

package lockd

// brokenDirViewRead answers GET /v1/directory on a lockd without a
// directory replica from its own (lagging) view: a deliberately broken
// build (-tags lockd_broken_dirviewread) that
// TestMigrateToANewCellAtOnce must catch (with the SDK's and proxy's
// re-read of an unknown cell, the client still gets the lagging map).
// Never set in a normal build.
const brokenDirViewRead = true
