package api

import (
	"strings"
	"testing"
)

// TestAttackTxnOpFields: a field a write's kind does not take is refused
// (bad_request, naming the write), not silently ignored: an "ephemeral"
// put would otherwise leave a persistent node no session end removes.
func TestAttackTxnOpFields(t *testing.T) {
	zero := uint64(0)
	for _, tc := range []struct {
		name string
		op   TxnOp
		says string // "" accepted
	}{
		{"ephemeral put", TxnOp{Op: TxnPut, Path: "/a/x", Ephemeral: true}, "ephemeral and sequential"},
		{"sequential delete", TxnOp{Op: TxnDelete, Path: "/a/x", Sequential: true}, "ephemeral and sequential"},
		{"versioned create", TxnOp{Op: TxnCreate, Path: "/a/x", Version: &zero}, "no version"},
		{"delete with a value", TxnOp{Op: TxnDelete, Path: "/a/x", Value: []byte("v")}, "no value"},
		{"delete making parents", TxnOp{Op: TxnDelete, Path: "/a/x", MakeParents: true}, "no value"},
		{"ephemeral sequential create", TxnOp{Op: TxnCreate, Path: "/a/x-", Ephemeral: true, Sequential: true, MakeParents: true}, ""},
		{"versioned put", TxnOp{Op: TxnPut, Path: "/a/x", Version: &zero, MakeParents: true}, ""},
		{"versioned delete", TxnOp{Op: TxnDelete, Path: "/a/x", Version: &zero}, ""},
	} {
		err := CheckTxnShape(&TxnRequest{Then: []TxnOp{{Op: TxnPut, Path: "/a/ok"}, tc.op}})
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: refused %v", tc.name, err)
		case tc.says != "" && (CodeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "write 1")):
			t.Errorf("%s: %v, want bad_request on write 1 saying %q", tc.name, err, tc.says)
		}
	}
}
