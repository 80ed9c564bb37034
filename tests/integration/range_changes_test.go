package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// rcDesc is changes as "kind path=value" lines, oldest first.
func rcDesc(cs []api.Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s=%s\n", c.Kind, c.Node.Path, c.Node.Value)
	}
	return b.String()
}

// rcNodes is a range answer's paths and values.
func rcNodes(r api.RangeResponse) string {
	var b strings.Builder
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "%s=%s ", n.Path, n.Value)
	}
	return b.String()
}

// rcChangesUntil reads the changes under root from from on, through
// cl, until want is a prefix of what it read (each read a long poll, at
// most tries of them).
func rcChangesUntil(t *testing.T, ctx context.Context, cl *cluster.Client, root string, from uint64, want string, tries int) []api.Change {
	t.Helper()
	var got []api.Change
	for i := 0; i < tries; i++ {
		var resp api.ChangesResponse
		must(t, cl.Do(ctx, api.RouteChanges, api.ChangesRequest{Root: root, From: from, WaitMS: 2000}, &resp))
		if resp.Floor > from {
			t.Fatalf("changes from %d: floor %d above it (the ring lost them on a cell that did not restart)", from, resp.Floor)
		}
		got = append(got, resp.Changes...)
		if strings.HasPrefix(rcDesc(got), want) {
			return got
		}
		if len(resp.Changes) > 0 {
			from = resp.Changes[len(resp.Changes)-1].Index + 1
		}
	}
	t.Fatalf("changes under %s: got\n%swant (a prefix)\n%s", root, rcDesc(got), want)
	return nil
}

// TestRangeAndChangesOnRealLockds: puts, a delete and an ephemeral
// node's expiry on the demo cell, read back through RouteRange (byte
// order, limit and more, count) and RouteChanges (every change in order,
// the expiry's delete included), directly and through a lockproxy; and a
// long poll, held with nothing new, answered with the put that woke it.
func TestRangeAndChangesOnRealLockds(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	direct := c.NewClient()
	defer direct.Close()
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const root = "/demo/rc"

	var start api.ChangesResponse
	must(t, direct.Do(ctx, api.RouteChanges, api.ChangesRequest{Root: root}, &start))
	from := start.Index + 1
	must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: root + "/a", Value: []byte("1"), MakeParents: true}, nil))
	must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: root + "/a-b", Value: []byte("2")}, nil))
	must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: root + "/a/x", Value: []byte("3")}, nil))
	must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: root + "/a-b", Value: []byte("4")}, nil))
	must(t, direct.Do(ctx, api.RouteDelete, api.DeleteRequest{Path: root + "/a/x"}, nil))

	// An ephemeral node whose session is never renewed: it expires.
	var sess api.SessionResponse
	must(t, direct.Do(ctx, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: api.MinLease.Milliseconds()}, &sess))
	must(t, direct.Do(ctx, api.RouteCreate, api.CreateRequest{WriteHeader: api.WriteHeader{Session: sess.Session, Secret: sess.Secret},
		Path: root + "/eph", Value: []byte("e"), Ephemeral: true}, nil))

	want := "put /demo/rc=\nput /demo/rc/a=1\nput /demo/rc/a-b=2\nput /demo/rc/a/x=3\nput /demo/rc/a-b=4\ndelete /demo/rc/a/x=3\n" +
		"put /demo/rc/eph=e\ndelete /demo/rc/eph=e\n"
	got := rcChangesUntil(t, ctx, direct, root, from, want, 20)
	for i := 1; i < len(got); i++ {
		if got[i].Index < got[i-1].Index {
			t.Fatalf("changes out of index order: %s", rcDesc(got))
		}
	}

	proxy, err := c.StartProxy("rc-proxy")
	must(t, err)
	via := cluster.NewClient(proxy.Addr)
	via.Token = direct.Token
	defer via.Close()
	for name, cl := range map[string]*cluster.Client{"direct": direct, "proxy": via} {
		var r api.RangeResponse
		must(t, cl.Do(ctx, api.RouteRange, api.RangeRequest{Root: root, Start: root, End: root + "0", Limit: 2}, &r))
		if rcNodes(r) != "/demo/rc= /demo/rc/a=1 " || r.Count != 3 || !r.More || r.Index == 0 || r.Epoch == 0 {
			t.Fatalf("%s: range %s count %d more %v index %d epoch %d", name, rcNodes(r), r.Count, r.More, r.Index, r.Epoch)
		}
		r = api.RangeResponse{} // fields left out of the answer (more: false) must not stay
		must(t, cl.Do(ctx, api.RouteRange, api.RangeRequest{Root: root, Start: root + "/a", End: root + "/b"}, &r))
		if rcNodes(r) != "/demo/rc/a=1 /demo/rc/a-b=4 " || r.Count != 2 || r.More {
			t.Fatalf("%s: range [a, b): %s count %d", name, rcNodes(r), r.Count)
		}
		cs := rcChangesUntil(t, ctx, cl, root, from, want, 1)
		if rcDesc(cs) != rcDesc(got) {
			t.Fatalf("%s: changes differ from the first read:\n%s", name, rcDesc(cs))
		}
	}

	// A read answers only its root's subtree: with /demo/rc/zz missing,
	// its span [zz, zz0) holds the sibling zz-x, which a tenant allowed
	// to read /demo/rc/zz must not see (lockd_broken_range_root).
	must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: root + "/zz-x", Value: []byte("s")}, nil))
	for name, cl := range map[string]*cluster.Client{"direct": direct, "proxy": via} {
		var r api.RangeResponse
		must(t, cl.Do(ctx, api.RouteRange, api.RangeRequest{Root: root + "/zz", Start: root + "/zz", End: root + "/zz0"}, &r))
		var rs api.RangesResponse
		must(t, cl.Do(ctx, api.RouteRanges, api.RangesRequest{Root: root, Reads: []api.RangeRequest{{Root: root + "/zz", Start: root + "/zz", End: root + "/zz0"}}}, &rs))
		if len(r.Nodes) != 0 || r.Count != 0 || len(rs.Reads) != 1 || len(rs.Reads[0].Nodes) != 0 {
			t.Fatalf("%s: a missing root's span answered %s (ranges: %v): its sibling", name, rcNodes(r), rs.Reads)
		}
	}

	// Long polls, direct and through the proxy: held with nothing new,
	// answered with the put that woke them.
	for i, cl := range []*cluster.Client{direct, via} {
		var now api.RangeResponse
		must(t, cl.Do(ctx, api.RouteRange, api.RangeRequest{Root: root, Start: root, CountOnly: true}, &now))
		done := make(chan api.ChangesResponse, 1)
		errs := make(chan error, 1)
		go func() {
			var resp api.ChangesResponse
			err := cl.Do(ctx, api.RouteChanges, api.ChangesRequest{Root: root, From: now.Index + 1, WaitMS: api.MaxChangesWaitMS}, &resp)
			errs <- err
			done <- resp
		}()
		time.Sleep(300 * time.Millisecond) // let the poll be held (if not, it answers empty and the check below fails)
		path := fmt.Sprintf("%s/woke%d", root, i)
		must(t, direct.Do(ctx, api.RoutePut, api.PutRequest{Path: path, Value: []byte("w")}, nil))
		must(t, <-errs)
		resp := <-done
		if rcDesc(resp.Changes) != "put "+path+"=w\n" {
			t.Fatalf("long poll %d answered %q, want the put of %s", i, rcDesc(resp.Changes), path)
		}
	}
}
