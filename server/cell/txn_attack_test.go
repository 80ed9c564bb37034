package cell

import (
	"context"
	"slices"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestAttackTxnCodecGate: a transaction on a cell below log codec 2 is
// refused codec_too_old before anything is fenced or proposed (an older
// replica could not apply the entry); at codec 2 a request whose callers
// do not match its writes is refused, never proposed with a write's ACL
// flags missing.
func TestAttackTxnCodecGate(t *testing.T) {
	req := api.TxnRequest{Then: []api.TxnOp{{Op: api.TxnPut, Path: "/a/x"}, {Op: api.TxnDelete, Path: "/a/y"}}}
	for _, tc := range []struct {
		codec fsm.LogCodec
		whos  []Caller
		want  api.Code
	}{
		{fsm.LogCodecJSON, []Caller{{}, {}}, api.CodeCodecTooOld},
		{fsm.LogCodecV1, []Caller{{}, {}}, api.CodeCodecTooOld},
		{fsm.LogCodecV2, []Caller{{}}, api.CodeInternal},
		{fsm.LogCodecV2, nil, api.CodeInternal},
	} {
		var c Cell
		c.logCodec.Store(uint32(tc.codec))
		_, err := c.Txn(context.Background(), req, tc.whos, nil)
		if got := api.CodeOf(err); got != tc.want {
			t.Errorf("codec %d, %d callers: %v, want %s", tc.codec, len(tc.whos), err, tc.want)
		}
	}
}

// TestAttackTxnFencePaths: every path a transaction's writes change is
// fenced and invalidated at its cachers before the entry is proposed, as
// each single write would: a put's node and parent (its ancestors with
// make_parents), a create's parent, a delete's node; each once.
func TestAttackTxnFencePaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []api.TxnOp
		want []string
	}{
		{"put", []api.TxnOp{{Op: api.TxnPut, Path: "/a/b/c"}}, []string{"/a/b/c", "/a/b"}},
		{"put with parents", []api.TxnOp{{Op: api.TxnPut, Path: "/a/b/c", MakeParents: true}}, []string{"/a/b/c", "/a/b", "/a"}},
		{"create", []api.TxnOp{{Op: api.TxnCreate, Path: "/a/b/c"}}, []string{"/a/b"}},
		{"sequential create", []api.TxnOp{{Op: api.TxnCreate, Path: "/a/q-", Sequential: true}}, []string{"/a"}},
		{"delete", []api.TxnOp{{Op: api.TxnDelete, Path: "/a/b/c"}}, []string{"/a/b/c"}},
		{"each once", []api.TxnOp{{Op: api.TxnPut, Path: "/a/b/x"}, {Op: api.TxnPut, Path: "/a/b/y"}, {Op: api.TxnDelete, Path: "/a/b/z"}},
			[]string{"/a/b/x", "/a/b", "/a/b/y", "/a/b/z"}},
	} {
		got := txnFencePaths(tc.ops)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: fences %v, want %v", tc.name, got, tc.want)
		}
	}
}
