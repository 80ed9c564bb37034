package api

import (
	"bytes"
	"strings"
	"testing"
)

// TestTxnCompareFields: a compare needs a known operator and carries
// only its own operand; the other kinds carry no operator or compare
// operand; container needs make_parents and uncontain is for a put;
// compare values count against MaxTxnValueBytes. Each refusal names its
// condition or write.
func TestTxnCompareFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		cond TxnCond
		op   TxnOp
		code Code // "" accepted
		says string
	}{
		{"create_rev =", TxnCond{If: CondCreateRev, Path: "/a/k", Cmp: CmpEqual}, TxnOp{}, "", ""},
		{"mod_rev <", TxnCond{If: CondModRev, Path: "/a/k", Cmp: CmpLess, Rev: 9}, TxnOp{}, "", ""},
		{"version_cmp !=", TxnCond{If: CondVersionCmp, Path: "/a/k", Cmp: CmpNotEqual, Version: 2}, TxnOp{}, "", ""},
		{"value >", TxnCond{If: CondValue, Path: "/a/k", Cmp: CmpGreater, Value: []byte("v")}, TxnOp{}, "", ""},
		{"owner =", TxnCond{If: CondOwner, Path: "/a/k", Cmp: CmpEqual, Owner: 4}, TxnOp{}, "", ""},
		{"no operator", TxnCond{If: CondValue, Path: "/a/k"}, TxnOp{}, CodeBadRequest, "condition 0: value compare needs cmp"},
		{"unknown operator", TxnCond{If: CondOwner, Path: "/a/k", Cmp: "<="}, TxnOp{}, CodeBadRequest, "condition 0: owner compare needs cmp"},
		{"foreign operand", TxnCond{If: CondOwner, Path: "/a/k", Cmp: CmpEqual, Rev: 1}, TxnOp{}, CodeBadRequest, "only its own operand"},
		{"version on a rev compare", TxnCond{If: CondCreateRev, Path: "/a/k", Cmp: CmpEqual, Version: 1}, TxnOp{}, CodeBadRequest, "only its own operand"},
		{"token on a compare", TxnCond{If: CondValue, Path: "/a/k", Cmp: CmpEqual, Token: 1}, TxnOp{}, CodeBadRequest, "only its own operand"},
		{"operator on version", TxnCond{If: CondVersion, Path: "/a/k", Version: 1, Cmp: CmpEqual}, TxnOp{}, CodeBadRequest, "are for a compare"},
		{"rev on exists", TxnCond{If: CondExists, Path: "/a/k", Rev: 1}, TxnOp{}, CodeBadRequest, "are for a compare"},
		{"unknown kind", TxnCond{If: "lease", Path: "/a/k", Cmp: CmpEqual}, TxnOp{}, CodeBadRequest, "unknown kind"},
		{"container put", TxnCond{If: CondExists, Path: "/a/k"}, TxnOp{Op: TxnPut, Path: "/a/x/y", MakeParents: true, Container: true, Uncontain: true}, "", ""},
		{"container create", TxnCond{If: CondExists, Path: "/a/k"}, TxnOp{Op: TxnCreate, Path: "/a/x/y", MakeParents: true, Container: true}, "", ""},
		{"container without parents", TxnCond{If: CondExists, Path: "/a/k"}, TxnOp{Op: TxnPut, Path: "/a/x/y", Container: true}, CodeBadRequest, "write 1: container"},
		{"uncontain create", TxnCond{If: CondExists, Path: "/a/k"}, TxnOp{Op: TxnCreate, Path: "/a/x", Uncontain: true}, CodeBadRequest, "write 1: uncontain is for a put"},
		{"uncontain delete", TxnCond{If: CondExists, Path: "/a/k"}, TxnOp{Op: TxnDelete, Path: "/a/x", Uncontain: true}, CodeBadRequest, "write 1: uncontain is for a put"},
		{"values summed", TxnCond{If: CondValue, Path: "/a/k", Cmp: CmpEqual, Value: bytes.Repeat([]byte("v"), MaxTxnValueBytes)},
			TxnOp{Op: TxnPut, Path: "/a/x", Value: []byte("w")}, CodeValueTooLarge, "MaxTxnValueBytes"},
	} {
		req := TxnRequest{If: []TxnCond{tc.cond}, Then: []TxnOp{{Op: TxnPut, Path: "/a/ok"}}}
		if tc.op.Op != "" {
			req.Then = append(req.Then, tc.op)
		}
		err := CheckTxnShape(&req)
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: refused %v", tc.name, err)
		case tc.code != "" && (CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.code, tc.says)
		}
	}
}
