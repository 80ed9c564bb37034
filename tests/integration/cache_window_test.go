package integration_test

// Issue 23, finding 11 (short cache grants): a cacheable read must declare
// the cache window its client serves for. An SDK or lockproxy built before
// short grants serves 9 s after its last confirmed KeepAlive, while the
// leader's invalidation deadlines and fence now wait 1.5 s: such a client
// is served uncached, never stale.

import (
	"errors"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestUndeclaredCacheWindowServedUncached reads one node with cache:true
// and each declared window: none (an old client), the session's own,
// longer than the session's, and a negative one. Only the session's own is
// granted; a negative one is refused bad_request. mutant
// lockd_broken_declaredwindow (any declared window granted) fails it.
func TestUndeclaredCacheWindowServedUncached(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Replicas: 3})
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	const path = "/demo/window/k"
	_, err := op.Put(ctx, path, []byte("v"), sdk.MakeParents())
	must(t, err)
	raw := c.NewClient()
	var sess api.SessionResponse
	mustDo(t, raw, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: 12000}, &sess)
	own := api.CacheWindowFor(12 * time.Second)
	for _, tc := range []struct {
		name      string
		windowMS  int64
		cacheable bool
		code      api.Code
	}{
		{"undeclared (a client from before short grants)", 0, false, ""},
		{"longer than the session's window (the old 9 s)", (9 * time.Second).Milliseconds(), false, ""},
		{"the session's window", own.Milliseconds(), true, ""},
		{"shorter", own.Milliseconds() / 2, true, ""},
		{"negative", -1, false, api.CodeBadRequest},
	} {
		var got api.GetResponse
		err := do(raw, api.RouteGet, api.ReadRequest{Path: path, Session: sess.Session, Secret: sess.Secret, Cache: true, CacheWindowMS: tc.windowMS}, &got)
		if tc.code != "" {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			}
			continue
		}
		must(t, err)
		if got.Cacheable != tc.cacheable || string(got.Node.Value) != "v" {
			t.Errorf("%s: cacheable=%v value %q, want cacheable=%v", tc.name, got.Cacheable, got.Node.Value, tc.cacheable)
		}
	}
}
