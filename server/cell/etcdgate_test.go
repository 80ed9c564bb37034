package cell

import (
	"context"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestEtcdVocabularyCodecGate: a transaction with a compare or a write
// with container/uncontain, and a put with container or uncontain, are
// refused codec_too_old on a cell below log codec 3, before anything is
// fenced or proposed: a replica of a V2 build would refuse the entry as
// undecodable (or apply the put without the container mark) and diverge.
// At codec 3 the transaction reaches the caller check (internal: no
// caller), never the gate.
func TestEtcdVocabularyCodecGate(t *testing.T) {
	cmp := api.TxnRequest{If: []api.TxnCond{{If: api.CondModRev, Path: "/a/k", Cmp: api.CmpEqual, Rev: 1}},
		Then: []api.TxnOp{{Op: api.TxnPut, Path: "/a/k"}}}
	flags := api.TxnRequest{Then: []api.TxnOp{{Op: api.TxnPut, Path: "/a/k/x", MakeParents: true, Container: true, Uncontain: true}}}
	for _, tc := range []struct {
		name  string
		codec fsm.LogCodec
		req   api.TxnRequest
		want  api.Code
	}{
		{"compare at 2", fsm.LogCodecV2, cmp, api.CodeCodecTooOld},
		{"compare at 1", fsm.LogCodecV1, cmp, api.CodeCodecTooOld},
		{"container write at 2", fsm.LogCodecV2, flags, api.CodeCodecTooOld},
		{"compare at 3", fsm.LogCodecV3, cmp, api.CodeInternal},
		{"container write at 3", fsm.LogCodecV3, flags, api.CodeInternal},
	} {
		var c Cell
		c.logCodec.Store(uint32(tc.codec))
		_, err := c.Txn(context.Background(), tc.req, nil, nil)
		if got := api.CodeOf(err); got != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	for _, req := range []api.PutRequest{
		{Path: "/a/k/x", MakeParents: true, Container: true},
		{Path: "/a/k", Uncontain: true},
	} {
		var c Cell
		c.logCodec.Store(uint32(fsm.LogCodecV2))
		if _, err := c.Put(context.Background(), req, Caller{}); api.CodeOf(err) != api.CodeCodecTooOld {
			t.Errorf("put %+v at codec 2: %v, want codec_too_old", req, err)
		}
	}
}
