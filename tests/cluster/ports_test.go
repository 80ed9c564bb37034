package cluster

import "testing"

// TestPortsNeverHandedOutTwice: ports from freePorts and FreePortRun are
// distinct across calls and blocks, and runs are consecutive.
func TestPortsNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	add := func(p int) {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if p < minTestPort || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, minTestPort, ephemeralLow())
		}
		seen[p] = true
	}
	for i := 0; i < 5; i++ {
		ps, err := freePorts(15) // crosses block boundaries
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			add(p)
		}
		base, err := FreePortRun(6)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 6; j++ {
			add(base + j)
		}
	}
	if _, err := FreePortRun(portBlock + 1); err == nil {
		t.Fatal("a run longer than a block was given")
	}
}
