package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/lockservice/lockd/api"
)

func grantCmd(sess uint64, path string, epoch uint64) Command {
	return Command{Op: OpCacheSession, Target: sess, Path: path, Epoch: epoch}
}

// The committed cache record (finding 11): grants under the current epoch
// are recorded, a later epoch's first grant starts the record afresh, a
// fenced change of a node drops it from every record, the session's end
// drops its record, and the record survives a snapshot.
func TestCacheRecord(t *testing.T) {
	h := newDemo(t)
	a, b := h.open(), h.open()
	for _, p := range []string{"/demo/x", "/demo/y", "/demo/d"} {
		h.ok(createCmd(p))
	}
	h.ok(grantCmd(a, "/demo/x", 1))
	h.ok(grantCmd(a, "/demo/y", 1))
	h.ok(grantCmd(b, "/demo/x", 1))
	h.fail(grantCmd(b, "/demo/y", 7), api.CodeNotLeader)
	h.fail(grantCmd(b, "not a path", 1), api.CodeBadRequest)
	record := func(id uint64) []string {
		for _, si := range h.s.Sessions() {
			if si.ID == id {
				return si.Cached
			}
		}
		return nil
	}
	want := func(id uint64, paths ...string) {
		t.Helper()
		if got := record(id); !reflect.DeepEqual(got, paths) && !(len(got) == 0 && len(paths) == 0) {
			t.Fatalf("session %d's record %v, want %v", id, got, paths)
		}
		if err := h.s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	want(a, "/demo/x", "/demo/y")
	want(b, "/demo/x")
	if !h.s.CacheRecorded(a, "/demo/y", 1) || h.s.CacheRecorded(a, "/demo/y", 2) {
		t.Fatal("CacheRecorded disagrees with the record")
	}
	h.ok(putCmd("/demo/x", "v2", nil))
	want(a, "/demo/y")
	want(b)
	h.ok(createCmd("/demo/y/child")) // the parent's metadata changed
	want(a)
	h.ok(grantCmd(a, "/demo/d", 1))
	b2 := restore(t, h.snap())
	if !bytes.Equal(snapBytes(t, b2), h.snap()) || !b2.CacheRecorded(a, "/demo/d", 1) {
		t.Fatal("the record did not survive a snapshot")
	}
	epoch := h.leaderStart()
	want(a, "/demo/d") // kept until a later epoch grants it anything
	h.ok(grantCmd(a, "/demo/x", epoch))
	want(a, "/demo/x")
	h.ok(closeCmd(a))
	if err := h.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
