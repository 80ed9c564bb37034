package api

import (
	"math/rand"
	"testing"
)

// a hostile lockd or proxy answers Server-Timing the SDK (and a
// lockproxy merging its lockd's stages) parses. No duration may come out
// negative or past the parser's own one-hour bound.
func TestAttackServerTimingNaN(t *testing.T) {
	for _, v := range []string{"apply;dur=NaN", "apply;dur=nan", "total;dur=-NaN", "x;dur=0x1p-2"} {
		st, err := ParseServerTiming(v)
		if err != nil {
			continue
		}
		for _, s := range st {
			if s.Dur < 0 || s.Dur > 3600e9 {
				t.Errorf("ParseServerTiming(%q) accepted duration %d (%v)", v, int64(s.Dur), s.Dur)
			}
		}
	}
}

func TestAttackServerTimingGarbage(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	alpha := []byte(`ab;=",\ dur1.e-+NaN`)
	for i := 0; i < 200000; i++ {
		b := make([]byte, rng.Intn(40))
		for j := range b {
			b[j] = alpha[rng.Intn(len(alpha))]
		}
		st, err := ParseServerTiming(string(b))
		if err != nil {
			continue
		}
		if len(st) > MaxTimingStages {
			t.Fatalf("%q: %d stages", b, len(st))
		}
		for _, s := range st {
			if s.Dur < 0 {
				t.Fatalf("%q: negative %v", b, s.Dur)
			}
		}
	}
}
