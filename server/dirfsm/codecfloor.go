package dirfsm

// The cluster's log codec floor, in the shape of etcd's cluster version:
// the lowest log codec the registered lockds decode, only ever raised
// (raise_codec, proposed by the directory's leader once every lockd
// advertises the new codec: CodecFloorDue), and a lockd that decodes less
// is refused registration from then on (codec_too_old). A cell writes its
// log in a codec only once the floor allows it (server/fsm, codecgate.go),
// so every replica of every cell decodes every entry: replicas of an older
// build never read an entry they refuse while the others apply it.

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// CodecFloor is the cluster's log codec floor.
func (s *State) CodecFloor() uint8 { return s.codecFloor }

// codecTooOld refuses l's registration if it decodes less than the floor.
func (s *State) codecTooOld(l api.LockdInfo) (Result, bool) {
	if l.LogCodec >= s.codecFloor || mutant.On(mutant.CodecFloorIgnored) {
		return Result{}, false
	}
	return refuse(api.CodeCodecTooOld, "lockd %d decodes log codec %d, the cluster writes %d: upgrade it before it rejoins", l.ID, l.LogCodec, s.codecFloor), true
}

// raiseCodec raises the floor to codec, if every registered lockd decodes
// it; at or below the floor it changes nothing.
func (s *State) raiseCodec(codec uint8) Result {
	if codec <= s.codecFloor {
		return Result{}
	}
	for _, l := range s.lockdList() {
		if l.LogCodec < codec {
			return refuse(api.CodeConflict, "lockd %d decodes log codec %d, not %d: the floor stays %d until every lockd is upgraded", l.ID, l.LogCodec, codec, s.codecFloor)
		}
	}
	s.codecFloor = codec
	return Result{}
}

// CodecFloorDue is the floor the directory's leader should raise to: the
// lowest codec the lockds advertise, if above floor (false otherwise, or
// with no lockd).
func CodecFloorDue(lockds []api.LockdInfo, floor uint8) (uint8, bool) {
	if len(lockds) == 0 {
		return floor, false
	}
	low := lockds[0].LogCodec
	for _, l := range lockds[1:] {
		low = min(low, l.LogCodec)
	}
	return low, low > floor
}
