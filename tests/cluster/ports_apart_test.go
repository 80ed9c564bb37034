package cluster

import "testing"

// TestFreePortsApart: FreePortsApart gives ports gap apart, and no other
// allocation of this process hands out a port of a block it took.
func TestFreePortsApart(t *testing.T) {
	block := func(p int) int { return (p - minTestPort) / portBlock }
	taken := map[int]bool{} // blocks FreePortsApart took
	for i := 0; i < 5; i++ {
		base, err := FreePortsApart(2, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []int{base, base + 100} {
			if p < minTestPort || p >= ephemeralLow() {
				t.Fatalf("port %d outside [%d, %d)", p, minTestPort, ephemeralLow())
			}
			if taken[block(p)] {
				t.Fatalf("port %d: its block was taken before", p)
			}
		}
		taken[block(base)], taken[block(base+100)] = true, true
		run, err := FreePortRun(portBlock)
		if err != nil {
			t.Fatal(err)
		}
		if taken[block(run)] || taken[block(run+portBlock-1)] {
			t.Fatalf("run from %d lies in a block FreePortsApart took", run)
		}
	}
	if _, err := FreePortsApart(0, 100); err == nil {
		t.Fatal("0 ports given")
	}
}
