package cell

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// While a new leader's fence holds a node (another session may still
// serve it from an earlier leader's grant), or holds the reader itself
// (it may still serve what an earlier leader granted it, and has not seen
// this epoch), a cacheable read of the node is served uncached (mayCache
// false): nobody enters the node's cachers, so the node's first change
// after the fence waits for the fence alone, not for an invalidation a
// silent reader lets run a cache window more; and the reader's committed
// record keeps what the earlier leader granted it. Once the fence has
// passed the same read is granted. mutant lockd_broken_fencecachers
// grants reads inside the fence.
func TestNoCacheGrantsInsideTheFence(t *testing.T) {
	cases := []struct {
		name string
		// cachedBefore is what each session cached under the first
		// leadership ("a" is another session, "b" the reader).
		cachedBefore map[string]string
		// after: the read comes once the fence has passed.
		after bool
		want  bool
	}{
		{"another session's earlier grant holds the node", map[string]string{"a": "/demo/x"}, false, false},
		{"the reader's own earlier grant holds the reader", map[string]string{"b": "/demo/y"}, false, false},
		{"both, the fence passed: granted", map[string]string{"a": "/demo/x", "b": "/demo/y"}, true, true},
		{"nobody cached before: granted at once", nil, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, sessions := failedOverWithCachers(t, tc.cachedBefore)
				if tc.after {
					time.Sleep(api.CacheWindow + time.Millisecond)
				}
				req := api.ReadRequest{Path: "/demo/x", Session: sessions["b"], Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}
				if got := r.c.mayCache(req); got != tc.want {
					t.Fatalf("read of /demo/x by session b may be cached: %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// failedOverWithCachers is a replica that led epoch 1, in which sessions
// "a" and "b" opened, /demo/x and /demo/y were written and each session
// in cached was granted its path; it now leads again under a new epoch,
// whose fence holds those grants. It returns the sessions' ids.
func failedOverWithCachers(t *testing.T, cached map[string]string) (*testReplica, map[string]uint64) {
	t.Helper()
	r, _ := leadingReplica(t)
	ids := map[string]uint64{}
	for _, name := range []string{"a", "b"} {
		ids[name] = r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	}
	for _, p := range []string{"/demo/x", "/demo/y"} {
		if res := r.apply(fsm.Command{Op: fsm.OpPut, Path: p, Value: []byte("v1")}); res.Err != nil {
			t.Fatalf("put %s: %v", p, res.Err)
		}
	}
	epoch := r.m.state.Epoch()
	for _, name := range []string{"a", "b"} {
		p, ok := cached[name]
		if !ok {
			continue
		}
		if res := r.apply(fsm.Command{Op: fsm.OpCacheSession, Target: ids[name], Path: p, Epoch: epoch}); res.Err != nil {
			t.Fatalf("grant %s to %s: %v", p, name, res.Err)
		}
	}
	r.c.term.Store(2)
	if res := r.apply(r.c.leaderStartCmd(2)); res.Err != nil {
		t.Fatalf("second leader_start: %v", res.Err)
	}
	if active, now := r.c.sessions.Active(); !active || now == epoch {
		t.Fatalf("not leading under a new epoch: active %v, epoch %d (was %d)", active, now, epoch)
	}
	return r, ids
}
