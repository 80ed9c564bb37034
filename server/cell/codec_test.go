package cell

import (
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/server/fsm"
)

// TestProposerEncodesInStateCodec: a replica proposes in JSON until its
// applied state holds codec 1 (a set_codec committed), in binary from
// then on, and in JSON always when it stands for an old build; an entry
// applied above the state's codec is counted, one written by the gate
// never is.
func TestProposerEncodesInStateCodec(t *testing.T) {
	put := fsm.Command{Op: fsm.OpPut, Path: "/demo/a", Value: []byte("v")}
	r := newTestReplica(t, 1, nil)
	old := newTestReplica(t, 2, nil)
	old.c.cfg.JSONLog = true
	steps := []struct {
		name      string
		cmd       fsm.Command // applied on both replicas first (zero: none)
		want, old fsm.LogCodec
	}{
		{"before any set_codec", fsm.Command{}, fsm.LogCodecJSON, fsm.LogCodecJSON},
		{"after a leader_start", fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 1}, fsm.LogCodecJSON, fsm.LogCodecJSON},
		{"after set_codec 1", fsm.SetCodecCmd(fsm.LogCodecV1), fsm.LogCodecV1, fsm.LogCodecJSON},
		{"after set_codec 0", fsm.SetCodecCmd(fsm.LogCodecJSON), fsm.LogCodecV1, fsm.LogCodecJSON},
	}
	for _, s := range steps {
		if s.cmd.Op != "" {
			r.apply(s.cmd)
			old.apply(s.cmd)
		}
		if got := fsm.EntryCodec(r.c.encodeProposal(&put)); got != s.want {
			t.Fatalf("%s: proposal in codec %d, want %d", s.name, got, s.want)
		}
		if got := fsm.EntryCodec(old.c.encodeProposal(&put)); got != s.old {
			t.Fatalf("%s: an old build's proposal in codec %d, want %d", s.name, got, s.old)
		}
	}
	if n := r.c.UngatedEntries() + old.c.UngatedEntries(); n != 0 {
		t.Fatalf("%d entries applied above the state's codec", n)
	}
	fresh := newTestReplica(t, 3, nil)
	if _, err := fresh.m.Update([]sm.Entry{{Index: 1, Cmd: put.EncodeFor(fsm.LogCodecV1)}}); err != nil {
		t.Fatal(err)
	}
	if n := fresh.c.UngatedEntries(); n != 1 {
		t.Fatalf("a binary entry at codec 0 counted %d times, want 1", n)
	}
}

// TestCodecToPropose: the leader raises the cell's codec to the
// directory's floor when it is above the state's and known to this build,
// and never on a lockd standing for an old build.
func TestCodecToPropose(t *testing.T) {
	for _, tc := range []struct {
		floor, state fsm.LogCodec
		jsonOnly     bool
		want         fsm.LogCodec
		due          bool
	}{
		{0, 0, false, 0, false},
		{1, 0, false, 1, true},
		{1, 1, false, 1, false},
		{0, 1, false, 1, false}, // a floor never lowers a cell
		{fsm.LogCodecNewest + 1, 0, false, 0, false},
		{1, 0, true, 0, false},
	} {
		got, due := codecToPropose(tc.floor, tc.state, tc.jsonOnly)
		if got != tc.want || due != tc.due {
			t.Errorf("codecToPropose(%d, %d, %v) = %d, %v; want %d, %v", tc.floor, tc.state, tc.jsonOnly, got, due, tc.want, tc.due)
		}
	}
}
