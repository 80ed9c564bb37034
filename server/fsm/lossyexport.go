package fsm

import "hash/fnv"

// lossyExportEvery is how rarely the lossy export mutant
// (broken_lossyexport.go) drops a leaf: one path hash in this many.
const lossyExportEvery = 50

// lossyExportSkips reports whether the lossy export mutant drops e from
// an export: only in that build, only leaf nodes (a copy stays well
// formed: every staged node's parent is there), one path hash in
// lossyExportEvery. Deterministic: every page and every retry drops the
// same nodes.
func lossyExportSkips(e exportEntry) bool {
	if !brokenLossyExport || e.n == nil || len(e.n.children) > 0 || e.n.prefixState != "" {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(e.path))
	return h.Sum32()%lossyExportEvery == 0
}
