package lockd

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// TestCodecAdvertised: a lockd advertises the codec it decodes (0 when it
// stands for an old build), registers again when the directory holds
// another, and is below a floor above that codec.
func TestCodecAdvertised(t *testing.T) {
	self := Peer{ID: 1, RaftAddr: "127.0.0.1:7101", APIAddr: "127.0.0.1:7001"}
	for _, tc := range []struct {
		name       string
		jsonLog    bool
		registered uint8 // the codec the directory holds for it
		floor      uint8
		advertise  uint8
		isReg      bool
		below      bool
	}{
		{"new build, registered by the bootstrap", false, 0, 0, NewestLogCodec, false, false},
		{"new build, registered", false, NewestLogCodec, 0, NewestLogCodec, true, false},
		{"new build, floor raised", false, NewestLogCodec, NewestLogCodec, NewestLogCodec, true, false},
		{"old build, registered", true, 0, 0, 0, true, false},
		{"old build, floor raised", true, 0, 1, 0, true, true},
		{"downgraded after the floor rose", true, 1, 1, 0, false, true},
	} {
		p := &Process{cfg: Config{ReplicaID: 1, Peers: []Peer{self}, JSONLog: tc.jsonLog}}
		d, err := directory.New(api.DirectoryResponse{Index: 5, LogCodec: tc.floor,
			Lockds: []api.LockdInfo{{ID: 1, RaftAddr: self.RaftAddr, APIAddr: self.APIAddr, LogCodec: tc.registered}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.selfInfo().LogCodec; got != tc.advertise {
			t.Errorf("%s: advertises %d, want %d", tc.name, got, tc.advertise)
		}
		if got := p.registered(d); got != tc.isReg {
			t.Errorf("%s: registered %v, want %v", tc.name, got, tc.isReg)
		}
		if got := p.belowFloor(d); got != tc.below {
			t.Errorf("%s: below the floor %v, want %v", tc.name, got, tc.below)
		}
	}
}
