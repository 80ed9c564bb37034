package fsm

import (
	"bytes"
	"errors"
	"testing"
)

// A frozen snapshot is the state at the moment it was taken, however the
// state moves on before it is written: the concurrent snapshot writes it
// while applies continue. Checked at many points of a generated history
// (puts, deletes, sequential and lock creates, prefix epochs, expiries).
func TestFreezeIsPointInTime(t *testing.T) {
	seed := testSeed(t)
	log := generate(seed, 3000)
	for at := 1; at < len(log.entries); at += 97 {
		s := New()
		for i, data := range log.entries[:at] {
			s.Apply(uint64(i+1), data)
		}
		want := snapBytes(t, s)
		f := s.Freeze()
		// Changes land after the freeze and, through hold, between the
		// freeze and the reading of each batch of nodes, as applies
		// interleave with a concurrent snapshot.
		next := at
		apply := func(k int) {
			for ; k > 0 && next < len(log.entries); k-- {
				s.Apply(uint64(next+1), log.entries[next])
				next++
			}
		}
		apply(25)
		var got bytes.Buffer
		held := 0
		hold := func() func() {
			held++
			apply(25)
			return func() {}
		}
		if err := f.Write(&got, hold); err != nil {
			t.Fatal(err)
		}
		s.Release(f)
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("seed %d: snapshot frozen at index %d differs from the state at that index once the state moved on", seed, at)
		}
		if n := len(f.nodes); held != (n+writeBatch-1)/writeBatch {
			t.Fatalf("held the state %d times for %d nodes", held, n)
		}
	}
}

// A second freeze voids the first: its Write fails instead of mixing states.
func TestFreezeVoidedByALaterOne(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/a"))
	f1 := h.s.Freeze()
	f2 := h.s.Freeze()
	if err := f1.Write(&bytes.Buffer{}, nil); !errors.Is(err, ErrFreezeVoid) {
		t.Fatalf("voided freeze wrote: %v", err)
	}
	if err := f2.Write(&bytes.Buffer{}, nil); err != nil {
		t.Fatal(err)
	}
	h.s.Release(f2)
	if h.s.frozen != nil {
		t.Fatal("released freeze still live")
	}
}
