package ctl

import (
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestParseTxn: the line format of lockctl txn, and its refusals.
func TestParseTxn(t *testing.T) {
	req, err := parseTxn(strings.Split(`# a guarded write
if holds /demo/locks/job 4294967301
if version /demo/job/state 4
if missing /demo/a
if exists /demo/b

put /demo/job/state step two
put@0 /demo/new x
create+ /demo/c/d/e v
create /demo/f
delete /demo/g`, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.If) != 4 || req.If[0].Token != 4294967301 || req.If[1].Version != 4 || req.If[2].If != api.CondMissing {
		t.Fatalf("conditions %+v", req.If)
	}
	if len(req.Then) != 5 || string(req.Then[0].Value) != "step two" || req.Then[1].Version == nil || *req.Then[1].Version != 0 ||
		!req.Then[0].MakeParents || !req.Then[2].MakeParents || !req.Then[3].MakeParents || req.Then[4].MakeParents || req.Then[4].Op != api.TxnDelete {
		t.Fatalf("writes %+v", req.Then)
	}
	for _, bad := range []string{"if holds /demo/l", "if holds /demo/l x", "if maybe /demo/a", "upsert /demo/a v", "put", "delete /demo/a extra", "put@x /demo/a v"} {
		if _, err := parseTxn([]string{bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
