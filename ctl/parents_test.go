package ctl

import (
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// lockctl put makes missing parents, as the SDK's Put does; --no-parents
// refuses with no_node and says how to get the default.
func TestPutParents(t *testing.T) {
	f := newFakeServer(t)
	at(t, f, "put", "/demo/config/flag", "on").ok(t)
	if r := at(t, f, "get", "/demo/config/flag").ok(t); !strings.Contains(r.stdout, "on") {
		t.Fatalf("get: %q", r.stdout)
	}
	r := at(t, f, "put", "/demo/none/x", "v", "--no-parents")
	r.failed(t, 1, api.CodeNoNode)
	if !strings.Contains(r.stderr, "--no-parents") {
		t.Fatalf("refusal %q does not say how to create parents", r.stderr)
	}
	at(t, f, "get", "/demo/none").failed(t, 1, api.CodeNoNode)
}
