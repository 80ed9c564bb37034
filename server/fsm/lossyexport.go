package fsm

import (
	"hash/fnv"

	"github.com/lockservice/lockd/internal/mutant"
)

// The export's mutants (internal/mutant): LossyExport drops leaves,
// ExportOwner drops owners.

// lossyExportEvery is how rarely the lossy export mutant
// (mutant.LossyExport) drops a leaf: one path hash in this many.
const lossyExportEvery = 50

// lossyExportSkips reports whether the lossy export mutant drops e from
// an export: only with that mutant on, only leaf nodes (a copy stays well
// formed: every staged node's parent is there), one path hash in
// lossyExportEvery. Deterministic: every page and every retry drops the
// same nodes.
func lossyExportSkips(e exportEntry) bool {
	if !mutant.On(mutant.LossyExport) || e.n == nil || e.n.numChildren() > 0 || e.n.prefixState != "" {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(e.path))
	return h.Sum32()%lossyExportEvery == 0
}

// exportedOwner is the owner a node's export carries: its own (none with
// mutant.ExportOwner on).
func exportedOwner(tenant string) string {
	if mutant.On(mutant.ExportOwner) {
		return ""
	}
	return tenant
}
