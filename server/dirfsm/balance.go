package dirfsm

import "sort"

// Transfer moves a cell's leadership to the replica on lockd To.
type Transfer struct {
	Cell string
	From uint64 // the lockd leading it now
	To   uint64
}

// BalanceLeaders picks one leadership transfer that evens out how many
// cells each lockd leads, or none (ok false) when no lockd leads two more
// than another that could take one of its cells. leaders maps each cell
// to the lockd leading it (cells without a known leader are left out);
// voters maps each cell to the lockds of its voting replicas. Pure and
// deterministic: the same input gives the same transfer.
func BalanceLeaders(leaders map[string]uint64, voters map[string][]uint64) (Transfer, bool) {
	load := map[uint64]int{}
	for _, vs := range voters {
		for _, l := range vs {
			load[l] += 0
		}
	}
	for _, l := range leaders {
		load[l]++
	}
	cells := make([]string, 0, len(leaders))
	for c := range leaders {
		cells = append(cells, c)
	}
	sort.Strings(cells)
	best, found := Transfer{}, false
	gain := 1 // a move must narrow the gap: from leads ≥ to leads + 2
	for _, c := range cells {
		from := leaders[c]
		for _, to := range voters[c] {
			if to == from {
				continue
			}
			if d := load[from] - load[to]; d > gain || d == gain && found && better(Transfer{c, from, to}, best) {
				best, found, gain = Transfer{Cell: c, From: from, To: to}, true, d
			}
		}
	}
	if !found || gain < 2 {
		return Transfer{}, false
	}
	return best, true
}

// better breaks ties: the lowest target lockd, then cell name.
func better(a, b Transfer) bool {
	if a.To != b.To {
		return a.To < b.To
	}
	return a.Cell < b.Cell
}
