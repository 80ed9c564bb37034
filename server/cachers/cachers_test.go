package cachers

import (
	"slices"
	"testing"
	"time"
)

// A change takes the path's cachers and makes reads of it uncacheable
// until it is done; a seal does the same for a whole prefix.
func TestBeginTakesCachersAndBlocksRegistration(t *testing.T) {
	tb := New()
	now := time.Unix(100, 0)
	for _, s := range []uint64{7, 3} {
		if !reg(tb, "/demo/x", s) {
			t.Fatal("registration refused with no change in flight")
		}
	}
	reg(tb, "/demo/y", 3)
	got, done := tb.Begin("/demo/x", now)
	if !slices.Equal(got, []uint64{3, 7}) {
		t.Fatalf("cachers %v, want [3 7]", got)
	}
	if reg(tb, "/demo/x", 9) {
		t.Fatal("a read during the change was made cacheable")
	}
	if !reg(tb, "/demo/y", 9) {
		t.Fatal("another path was blocked")
	}
	if _, _, oldest := tb.Stats(); !oldest.Equal(now) {
		t.Fatalf("oldest change %v, want %v", oldest, now)
	}
	done(true)
	if again, done2 := tb.Begin("/demo/x", now); len(again) != 0 {
		t.Fatalf("cachers invalidated once are returned again: %v", again)
	} else {
		done2(true)
	}
	if !reg(tb, "/demo/x", 9) {
		t.Fatal("registration refused after the change")
	}

	under, doneUnder := tb.BeginUnder("/demo", now)
	if len(under) != 2 || !slices.Equal(under[3], []string{"/demo/y"}) || len(under[9]) != 2 {
		t.Fatalf("cachers under /demo: %v", under)
	}
	if reg(tb, "/demo/a/b", 1) || !reg(tb, "/demox", 1) {
		t.Fatal("a seal of /demo must block /demo/a/b and only it")
	}
	doneUnder(true)
	if !reg(tb, "/demo/a/b", 1) {
		t.Fatal("still blocked after the seal")
	}
	tb.Forget(1)
	if paths, entries, _ := tb.Stats(); paths != 0 || entries != 0 {
		t.Fatalf("%d paths, %d entries left after forgetting every cacher", paths, entries)
	}
}

// A second change of a path while the first is still invalidating must
// wait for the first one's cachers too: the first took them from the
// table, and they may still hold the old value (chaos found this: a CAS
// committed while a concurrent failed CAS's invalidation was unacked, and
// the cacher read its stale copy). A change that gave up puts its
// sessions back, for the next change to invalidate.
func TestOverlappingChangesShareCachers(t *testing.T) {
	tb := New()
	now := time.Unix(100, 0)
	reg(tb, "/demo/k", 5)
	first, done1 := tb.Begin("/demo/k", now)
	second, done2 := tb.Begin("/demo/k", now)
	if !slices.Equal(first, []uint64{5}) || !slices.Equal(second, []uint64{5}) {
		t.Fatalf("first change invalidates %v, the overlapping second %v; both must include 5", first, second)
	}
	done2(true)
	done1(false) // gave up waiting: 5 may still cache the old value
	third, done3 := tb.Begin("/demo/k", now)
	if !slices.Equal(third, []uint64{5}) {
		t.Fatalf("after a change gave up, the next invalidates %v; want [5]", third)
	}
	done3(true)
	if fourth, done4 := tb.Begin("/demo/k", now); len(fourth) != 0 {
		t.Fatalf("acknowledged cachers invalidated again: %v", fourth)
	} else {
		done4(true)
	}
	under, doneUnder := tb.BeginUnder("/demo", now)
	if len(under) != 0 {
		t.Fatalf("seal after everything was acknowledged: %v", under)
	}
	doneUnder(true)
}

// reg registers session, without a tenant, and reports whether it was.
func reg(tb *Table, path string, session uint64) bool {
	return tb.Register(path, session, "") == Registered
}
