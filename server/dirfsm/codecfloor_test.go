package dirfsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestCodecFloor: the floor rises only once every registered lockd
// advertises the codec, never falls, and from then on a lockd decoding
// less is refused registration (codec_too_old) while one decoding enough
// registers; the floor is in the directory view and its snapshot.
func TestCodecFloor(t *testing.T) {
	a := bootstrapped(t, 5) // registered by the bootstrap: codec 0
	ls := lockds(6)
	reg := func(i int, codec uint8) Command {
		l := ls[i]
		l.LogCodec = codec
		return Command{Op: OpRegister, Lockd: &l}
	}
	raise := func(codec uint8) Command { return Command{Op: OpRaiseCodec, Codec: codec} }
	type step struct {
		name  string
		cmd   Command
		code  api.Code
		floor uint8
	}
	steps := []step{{"raise while every lockd is at 0", raise(1), api.CodeConflict, 0}}
	for i := range 4 {
		steps = append(steps, step{fmt.Sprintf("lockd %d upgraded", i+1), reg(i, 1), "", 0})
	}
	steps = append(steps, []step{
		{"raise while lockd 5 is at 0", raise(1), api.CodeConflict, 0},
		{"lockd 5 upgraded", reg(4, 1), "", 0},
		{"raise once all decode 1", raise(1), "", 1},
		{"raise again: idempotent", raise(1), "", 1},
		{"lower: nothing", raise(0), "", 1},
		{"raise past what lockds decode", raise(2), api.CodeConflict, 1},
		{"lockd 5 downgraded", reg(4, 0), api.CodeCodecTooOld, 1},
		{"a new lockd of an old build", reg(5, 0), api.CodeCodecTooOld, 1},
		{"a new lockd of a new build", reg(5, 1), "", 1},
	}...)
	for _, step := range steps {
		r := a.do(step.cmd)
		if got := codeOf(r); got != step.code {
			t.Fatalf("%s: %v, want code %q", step.name, r.Err, step.code)
		}
		if got := a.s.Response().LogCodec; got != step.floor {
			t.Fatalf("%s: floor %d, want %d", step.name, got, step.floor)
		}
	}
	if l := a.s.lockds[5]; l.LogCodec != 1 {
		t.Fatalf("a refused registration changed lockd 5: %+v", l)
	}
	var buf bytes.Buffer
	if err := a.s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	back := NewState()
	if err := back.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if back.CodecFloor() != 1 {
		t.Fatalf("the snapshot restores floor %d, want 1", back.CodecFloor())
	}
}

// TestCodecFloorDue: the directory's leader proposes the lowest codec the
// lockds advertise, when above the floor.
func TestCodecFloorDue(t *testing.T) {
	at := func(codecs ...uint8) []api.LockdInfo {
		var out []api.LockdInfo
		for i, c := range codecs {
			out = append(out, api.LockdInfo{ID: uint64(i + 1), LogCodec: c})
		}
		return out
	}
	for _, tc := range []struct {
		lockds []api.LockdInfo
		floor  uint8
		want   uint8
		due    bool
	}{
		{nil, 0, 0, false},
		{at(0, 1, 1), 0, 0, false},
		{at(1, 1, 1), 0, 1, true},
		{at(1, 1, 1), 1, 1, false},
		{at(2, 1, 2), 0, 1, true},
	} {
		got, due := CodecFloorDue(tc.lockds, tc.floor)
		if due != tc.due || (due && got != tc.want) {
			t.Errorf("CodecFloorDue(%v, %d) = %d, %v; want %d, %v", tc.lockds, tc.floor, got, due, tc.want, tc.due)
		}
	}
}
