//go:build lockd_broken_lossyexport

package fsm

// brokenLossyExport makes a prefix's export silently skip some leaf
// nodes (lossyExportSkips): a move then loses acknowledged writes. A
// deliberately broken build (-tags lockd_broken_lossyexport) that the
// fault suite's checker m2 (acknowledged values survive every move) must
// catch; with the copy digest check on, the commit is refused
// (copy_mismatch) instead. Never set in a normal build.
const brokenLossyExport = true
