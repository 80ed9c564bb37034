package sdk

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// dirAt is the fake's directory at index, with only the prefixes named
// (each served by its one cell).
func dirAt(fc *fakeCell, index uint64, prefixes ...string) api.DirectoryResponse {
	_, v := fc.handle(0, api.RouteDirectory, nil)
	d := v.(api.DirectoryResponse)
	d.Index = index
	d.Prefixes = slices.DeleteFunc(d.Prefixes, func(p api.PrefixInfo) bool { return !slices.Contains(prefixes, p.Prefix) })
	for i := range d.Cells {
		d.Cells[i].Prefixes = slices.Clone(prefixes)
	}
	return d
}

// serveDirectory makes the fake answer directory reads with d, and
// whatever is stored in the pointer returned from then on.
func serveDirectory(fc *fakeCell, d api.DirectoryResponse) *atomic.Pointer[api.DirectoryResponse] {
	var served atomic.Pointer[api.DirectoryResponse]
	served.Store(&d)
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route == api.RouteDirectory {
			return 200, *served.Load()
		}
		return next()
	})
	return &served
}

// TestDirectoryNeverGoesBack: a client never trades its directory for an
// older one (a lockd without a directory replica answers its own lagging
// view), and a call on a prefix its view lacks reads the directory once
// more before it is refused wrong_cell (a prefix assigned a moment ago).
func TestDirectoryNeverGoesBack(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := startFakeCell(t, fake.Options{Replicas: 1, Memory: true, Prefixes: []string{"/demo", "/extra"}})
		served := serveDirectory(fc, dirAt(fc, 1, "/demo"))
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)

		// /extra is assigned after the client read the directory: its
		// first call reads it again and goes through.
		d5 := dirAt(fc, 5, "/demo", "/extra")
		served.Store(&d5)
		if _, err := c.Put(ctx, "/extra/a", []byte("1")); err != nil {
			t.Fatalf("put on a prefix assigned since the last read: %v", err)
		}
		// A lagging replica answers the map before the assign.
		d3 := dirAt(fc, 3, "/demo")
		served.Store(&d3)
		if err := c.RefreshDirectory(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.Directory().Index; got != 5 {
			t.Fatalf("directory at index %d after reading an older one, want 5 kept", got)
		}
		if _, err := c.Put(ctx, "/extra/b", []byte("2")); err != nil {
			t.Fatalf("put after an older directory was read: %v", err)
		}
		// A prefix no directory names is still refused, after one read;
		// asked again at once, without one.
		before := len(fc.requests(api.RouteDirectory))
		for range 3 {
			if _, err := c.Put(ctx, "/nowhere/x", nil); !errors.Is(err, ErrWrongCell) {
				t.Fatalf("put on an unknown prefix: %v, want wrong_cell", err)
			}
		}
		if n := len(fc.requests(api.RouteDirectory)) - before; n != 1 {
			t.Fatalf("%d directory reads for three calls on an unknown prefix, want 1", n)
		}
		// Only older maps for dirGoBackAfter: the directory itself went
		// back (rebuilt), and the client follows it.
		for range 3 {
			if err := c.RefreshDirectory(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(dirGoBackAfter / 2)
		}
		if err := c.RefreshDirectory(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if got := c.Directory().Index; got != 3 {
			t.Fatalf("directory at index %d after older maps for %v, want 3 followed", got, dirGoBackAfter)
		}
	})
}
