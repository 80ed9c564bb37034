package httpapi

import (
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestTxnBranchReadsChecked: a transaction's branch reads are checked as
// a ranges read before anything is proposed: the read role on each root
// (a tenant that may write a path reads no other's through its
// transaction: mutant lockd_broken_range_acl), the span under its
// root, the transaction's own prefix, MaxRangesPerRead a branch, and the
// limits clamped.
func TestTxnBranchReadsChecked(t *testing.T) {
	acme := principal{name: "acme", tenant: api.Tenant{Name: "acme", Grants: []api.Grant{
		{Prefix: "/acme/app", Roles: []api.Role{api.RoleWrite}}, {Prefix: "/acme/pub", Roles: []api.Role{api.RoleRead}}}}}
	admin := principal{name: api.BootstrapAdmin, admin: true}
	txn := func(reads *api.TxnReads) *api.TxnRequest {
		return &api.TxnRequest{Then: []api.TxnOp{{Op: api.TxnPut, Path: "/acme/app/k"}}, Reads: reads}
	}
	rd := func(root string) api.RangeRequest { return api.RangeRequest{Root: root, Start: root} }
	tooMany := make([]api.RangeRequest, api.MaxRangesPerRead+1)
	for i := range tooMany {
		tooMany[i] = rd("/acme/app")
	}
	for _, tc := range []struct {
		name  string
		p     principal
		req   *api.TxnRequest
		code  api.Code // "" allowed
		says  string
		limit int // the first then read's clamped limit, when allowed
	}{
		{name: "none asked", p: acme, req: txn(nil)},
		{name: "in its grants", p: acme, req: txn(&api.TxnReads{Then: []api.RangeRequest{rd("/acme/app")}, Else: []api.RangeRequest{rd("/acme/pub")}}), limit: api.MaxRangeKeys},
		{name: "a limit kept", p: acme, req: txn(&api.TxnReads{Then: []api.RangeRequest{{Root: "/acme/app", Start: "/acme/app", Limit: 1}}}), limit: 1},
		{name: "outside its grants, then", p: acme, req: txn(&api.TxnReads{Then: []api.RangeRequest{rd("/acme/secret")}}), code: api.CodeForbidden, says: "then read 0"},
		{name: "outside its grants, else", p: acme, req: txn(&api.TxnReads{Else: []api.RangeRequest{rd("/acme/pub"), rd("/acme")}}), code: api.CodeForbidden, says: "else read 1"},
		{name: "span past its root", p: acme, req: txn(&api.TxnReads{Then: []api.RangeRequest{{Root: "/acme/pub", Start: "/acme/secret"}}}), code: api.CodeBadRequest, says: "then read 0"},
		{name: "another prefix", p: admin, req: txn(&api.TxnReads{Then: []api.RangeRequest{rd("/other")}}), code: api.CodeBadRequest, says: "not in prefix /acme"},
		{name: "too many", p: admin, req: txn(&api.TxnReads{Else: tooMany}), code: api.CodeBadRequest, says: "MaxRangesPerRead"},
		{name: "negative limit", p: admin, req: txn(&api.TxnReads{Then: []api.RangeRequest{{Root: "/acme", Start: "/acme", Limit: -1}}}), code: api.CodeBadRequest, says: "negative"},
	} {
		got, err := txnReads(tc.p, tc.req)
		if tc.code != "" {
			if api.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.code, tc.says)
			}
			continue
		}
		switch {
		case err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.req.Reads == nil && got != nil:
			t.Errorf("%s: reads %+v made of none", tc.name, got)
		case tc.req.Reads != nil && (len(got.ThenLimits) != len(got.Then) || len(got.ElseLimits) != len(got.Else)):
			t.Errorf("%s: limits %v %v for %d and %d reads", tc.name, got.ThenLimits, got.ElseLimits, len(got.Then), len(got.Else))
		case tc.limit != 0 && got.ThenLimits[0] != tc.limit:
			t.Errorf("%s: limit %d, want %d", tc.name, got.ThenLimits[0], tc.limit)
		}
	}
}
