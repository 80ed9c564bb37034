package cluster

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestFloorReached(t *testing.T) {
	st := func(adv, floor uint8) api.StatusResponse {
		return api.StatusResponse{LogCodec: adv, LogCodecFloor: floor}
	}
	for _, tc := range []struct {
		name string
		sts  map[int]api.StatusResponse
		n    int
		want bool
	}{
		{"all at 1, floor 1", map[int]api.StatusResponse{1: st(1, 1), 2: st(1, 1)}, 2, true},
		{"floor not raised yet", map[int]api.StatusResponse{1: st(1, 0), 2: st(1, 1)}, 2, false},
		{"an old lockd keeps it at 0", map[int]api.StatusResponse{1: st(1, 0), 2: st(0, 0)}, 2, true},
		{"a lockd did not answer", map[int]api.StatusResponse{1: st(1, 1)}, 2, false},
	} {
		if got := floorReached(tc.sts, tc.n); got != tc.want {
			t.Errorf("%s: floorReached = %v, want %v", tc.name, got, tc.want)
		}
	}
}
