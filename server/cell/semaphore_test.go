package cell

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestPermitGate: a permit's create is refused codec_too_old on a cell
// below log codec 2, and passes at 2; other creates pass either way.
func TestPermitGate(t *testing.T) {
	cases := []struct {
		codec fsm.LogCodec
		req   api.CreateRequest
		want  api.Code
	}{
		{fsm.LogCodecV1, api.CreateRequest{Lock: api.LockPermit, Permits: 3}, api.CodeCodecTooOld},
		{fsm.LogCodecV1, api.CreateRequest{Permits: 3}, api.CodeCodecTooOld},
		{fsm.LogCodecV1, api.CreateRequest{Lock: api.LockExclusive}, ""},
		{fsm.LogCodecV2, api.CreateRequest{Lock: api.LockPermit, Permits: 3}, ""},
	}
	for _, tc := range cases {
		var c Cell
		c.logCodec.Store(uint32(tc.codec))
		if got := api.CodeOf(c.permitGate(&tc.req)); got != tc.want {
			t.Errorf("codec %d, %+v: %q, want %q", tc.codec, tc.req, got, tc.want)
		}
	}
}
