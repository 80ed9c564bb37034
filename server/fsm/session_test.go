package fsm

import (
	"bytes"
	"reflect"
	"sort"
	"testing"

	"github.com/lockservice/lockd/api"
)

// sessionFixture: two sessions with ephemerals (one a lock holder with a
// waiter from the other), plus persistent nodes.
type sessionFixture struct {
	h              *harness
	s1, s2         uint64
	mine, theirs   []string // ephemerals of s1, s2
	persistent     []string
	s1Lock, s2Lock string
}

func newSessionFixture(t *testing.T) *sessionFixture {
	h := newDemo(t)
	f := &sessionFixture{h: h, s1: h.open(), s2: h.open()}
	for _, p := range []string{"/demo/a", "/demo/a/b", "/demo/l"} {
		h.ok(createCmd(p))
	}
	f.persistent = []string{"/demo", "/demo/a", "/demo/a/b", "/demo/l"}
	f.mine = []string{"/demo/a/e1", "/demo/a/b/e2"}
	for _, p := range f.mine {
		h.ok(ephCmd(f.s1, p))
	}
	f.s1Lock = h.ok(lockCmd(f.s1, "/demo/l", api.LockExclusive)).Node.Path
	f.mine = append(f.mine, f.s1Lock)
	f.mine = append(f.mine, h.ok(Command{Op: OpCreate, Path: "/demo/a/s-", Ephemeral: true, Sequential: true,
		WriteHeader: api.WriteHeader{Session: f.s1, Request: 1}}).Node.Path)
	f.theirs = []string{"/demo/a/x"}
	h.ok(ephCmd(f.s2, "/demo/a/x"))
	r := h.ok(lockCmd(f.s2, "/demo/l", api.LockExclusive))
	if r.WaitFor != f.s1Lock {
		t.Fatalf("s2's lock waits for %q, want %q", r.WaitFor, f.s1Lock)
	}
	f.s2Lock = r.Node.Path
	f.theirs = append(f.theirs, f.s2Lock)
	return f
}

func (f *sessionFixture) check(t *testing.T, s1Gone bool) {
	t.Helper()
	for _, p := range f.mine {
		if _, ok := f.h.s.Get(p); ok == s1Gone {
			t.Errorf("%s exists=%v", p, ok)
		}
	}
	for _, p := range append(append([]string{}, f.theirs...), f.persistent...) {
		if _, ok := f.h.s.Get(p); !ok {
			t.Errorf("%s was deleted", p)
		}
	}
}

// wantEndChanges: a Deleted change for each of paths (in path order) and a
// Children change for its parent, all at index.
func wantEndChanges(paths []string, index uint64) []Change {
	sorted := append([]string(nil), paths...)
	sort.Strings(sorted)
	var out []Change
	for _, p := range sorted {
		out = append(out, Change{Path: p, Type: ChangeDeleted, Index: index}, Change{Path: api.Parent(p), Type: ChangeChildren, Index: index})
	}
	return out
}

func TestSessionEnd(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(f *sessionFixture) Command
	}{
		{"expire", func(f *sessionFixture) Command { return expireCmd(f.s1, f.h.s.Epoch()) }},
		{"close", func(f *sessionFixture) Command { return closeCmd(f.s1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSessionFixture(t)
			h := f.h
			r := h.ok(tt.end(f))
			if r.Session != f.s1 {
				t.Fatalf("result session %d, want %d", r.Session, f.s1)
			}
			if want := wantEndChanges(f.mine, h.idx); !reflect.DeepEqual(h.changes, want) {
				t.Fatalf("changes\n got %v\nwant %v", h.changes, want)
			}
			f.check(t, true)
			if h.s.NumSessions() != 1 || h.s.SessionExists(f.s2) != nil {
				t.Fatalf("sessions %v", h.s.Sessions())
			}
			// The waiter now holds.
			if _, held, _, _ := h.s.LockState(f.s2Lock); !held {
				t.Errorf("%s does not hold after its predecessor's session ended", f.s2Lock)
			}
			// Requests naming the ended session.
			if e := h.s.SessionExists(f.s1); e == nil || e.Code != api.CodeSessionExpired {
				t.Errorf("SessionExists: %v", e)
			}
			h.fail(ephCmd(f.s1, "/demo/again"), api.CodeSessionExpired)
			h.fail(req(createCmd("/demo/again"), f.s1, 2, 0), api.CodeSessionExpired)
			h.fail(req(createCmd("/demo/again"), f.s1, 1, 0), api.CodeSessionExpired) // even an answered one
			h.fail(expireCmd(f.s1, h.s.Epoch()), api.CodeSessionExpired)
			// Closing twice is fine and does nothing.
			before := snapNoIndex(t, h.s)
			h.ok(closeCmd(f.s1))
			if len(h.changes) != 0 || !bytes.Equal(before, snapNoIndex(t, h.s)) {
				t.Fatal("second close changed something")
			}
			// Never-seen ids.
			for _, c := range []Command{
				ephCmd(12345, "/demo/n"), req(createCmd("/demo/n"), 12345, 1, 0),
				closeCmd(12345), expireCmd(12345, h.s.Epoch()), closeCmd(0), expireCmd(0, h.s.Epoch()),
			} {
				h.fail(c, api.CodeNoSession)
			}
			// Ended-session memory survives a snapshot.
			rh := harnessOn(t, restore(t, h.snap()))
			rh.fail(ephCmd(f.s1, "/demo/again"), api.CodeSessionExpired)
			rh.ok(closeCmd(f.s1))
		})
	}
}

// A deposed leader's late expiry must never free a live session: an expiry
// decided under any epoch but the current one is refused and changes nothing.
func TestExpireEpochGuard(t *testing.T) {
	f := newSessionFixture(t)
	h := f.h
	old := h.s.Epoch()
	if e := h.leaderStart(); e != old+1 || h.s.Epoch() != e {
		t.Fatalf("leader_start gave epoch %d (state %d), want %d", e, h.s.Epoch(), old+1)
	}
	if id, term := h.s.Leader(); id != 1 || term != h.idx-1 {
		t.Fatalf("Leader() = %d, %d", id, term)
	}
	for _, epoch := range []uint64{old, 0, old + 2} {
		before := snapNoIndex(t, h.s)
		h.fail(expireCmd(f.s1, epoch), api.CodeNotLeader)
		if !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatalf("refused expiry (epoch %d) changed the state", epoch)
		}
		f.check(t, false)
		if h.s.SessionExists(f.s1) != nil {
			t.Fatal("session ended by a stale expiry")
		}
	}
	// The session is live: it still works.
	h.ok(ephCmd(f.s1, "/demo/still"))
	f.mine = append(f.mine, "/demo/still")
	h.ok(expireCmd(f.s1, h.s.Epoch()))
	f.check(t, true)
}

// Open: the id is the index, the lease is clamped, the epoch is reported.
func TestOpenSession(t *testing.T) {
	h := newDemo(t)
	for _, c := range []struct{ ask, want int64 }{
		{0, api.DefaultLease.Milliseconds()},
		{-5, api.DefaultLease.Milliseconds()},
		{1, api.MinLease.Milliseconds()},
		{5000, 5000},
		{1 << 40, api.MaxLease.Milliseconds()},
	} {
		r := h.ok(Command{Op: OpOpenSession, LeaseMS: c.ask})
		if r.Session != h.idx || r.LeaseMS != c.want || r.Epoch != h.s.Epoch() {
			t.Errorf("open(lease %d) = %+v, want session %d lease %d epoch %d", c.ask, r, h.idx, c.want, h.s.Epoch())
		}
	}
	if got := h.s.Sessions(); len(got) != 5 || got[0].ID >= got[4].ID {
		t.Errorf("Sessions() = %v", got)
	}
}

// The state remembers the last MaxEndedSessions ended ids; older ones fall
// back to no_session.
func TestEndedSessionMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 2*MaxEndedSessions entries")
	}
	s := New()
	idx := uint64(0)
	apply := func(c Command) Result {
		idx++
		b, _ := s.Apply(idx, c.Encode())
		r, _ := DecodeResult(b)
		return r
	}
	var first, second uint64
	for i := 0; i <= MaxEndedSessions; i++ {
		id := apply(Command{Op: OpOpenSession}).Session
		if i == 0 {
			first = id
		} else if i == 1 {
			second = id
		}
		if r := apply(closeCmd(id)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if e := s.SessionExists(first); e == nil || e.Code != api.CodeNoSession {
		t.Errorf("oldest ended session: %v, want no_session", e)
	}
	if e := s.SessionExists(second); e == nil || e.Code != api.CodeSessionExpired {
		t.Errorf("second oldest: %v, want session_expired", e)
	}
	rs := restore(t, snapBytes(t, s))
	if e := rs.SessionExists(first); e == nil || e.Code != api.CodeNoSession {
		t.Errorf("restored, oldest: %v", e)
	}
	if e := rs.SessionExists(second); e == nil || e.Code != api.CodeSessionExpired {
		t.Errorf("restored, second oldest: %v", e)
	}
}

// cache_session marks a live session as caching, idempotently; the mark
// survives a snapshot (a new leader reads it to know whom to wait for);
// an unknown session is refused.
func TestCacheSession(t *testing.T) {
	h := newDemo(t)
	id := h.open()
	other := h.open()
	h.ok(Command{Op: OpCacheSession, Target: id})
	h.ok(Command{Op: OpCacheSession, Target: id})
	h.fail(Command{Op: OpCacheSession, Target: 999_999}, api.CodeNoSession)
	for _, s := range []*State{h.s, restore(t, h.snap())} {
		got := map[uint64]bool{}
		for _, si := range s.Sessions() {
			got[si.ID] = si.Caches
		}
		if !got[id] || got[other] {
			t.Fatalf("caches by session: %v; want only %d", got, id)
		}
	}
}
