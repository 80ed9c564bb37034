package cell

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestStageGateContainers: a prefix move's staged page naming a
// container directory is refused codec_too_old on a cell below log
// codec 2 (a replica of an older build would drop the mark, or the
// whole entry, and diverge); other pages and other ops pass, and at
// codec 2 everything passes.
func TestStageGateContainers(t *testing.T) {
	withContainer := []api.ExportedNode{{Path: "/p/a"}, {Path: "/p/a/lock", Container: true}}
	plain := []api.ExportedNode{{Path: "/p/a"}}
	cases := []struct {
		codec fsm.LogCodec
		req   api.PrefixOpRequest
		want  api.Code
	}{
		{fsm.LogCodecV1, api.PrefixOpRequest{Op: api.PrefixStage, Nodes: withContainer}, api.CodeCodecTooOld},
		{fsm.LogCodecJSON, api.PrefixOpRequest{Op: api.PrefixStage, Nodes: withContainer}, api.CodeCodecTooOld},
		{fsm.LogCodecV1, api.PrefixOpRequest{Op: api.PrefixStage, Nodes: plain}, ""},
		{fsm.LogCodecV1, api.PrefixOpRequest{Op: api.PrefixSeal, Nodes: withContainer}, ""},
		{fsm.LogCodecV2, api.PrefixOpRequest{Op: api.PrefixStage, Nodes: withContainer}, ""},
	}
	for _, tc := range cases {
		var c Cell
		c.logCodec.Store(uint32(tc.codec))
		if got := api.CodeOf(c.stageGate(&tc.req)); got != tc.want {
			t.Errorf("codec %d, %s %+v: %q, want %q", tc.codec, tc.req.Op, tc.req.Nodes, got, tc.want)
		}
	}
}
