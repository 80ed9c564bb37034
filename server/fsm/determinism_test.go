package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/lockservice/lockd/api"
)

const genLen = 3000

// replay applies g's entries [from, to) to h, comparing each result and
// change list with what the generator's reference state answered.
func replay(t *testing.T, h *harness, g genLog, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		h.applyBytes(g.entries[i])
		if !bytes.Equal(h.raw, g.results[i]) {
			t.Fatalf("entry %d (%s): result\n got %s\nwant %s", i, g.entries[i], h.raw, g.results[i])
		}
		if !reflect.DeepEqual(h.changes, g.changes[i]) {
			t.Fatalf("entry %d (%s): changes\n got %v\nwant %v", i, g.entries[i], h.changes, g.changes[i])
		}
	}
}

// TestGeneratedLogCoverage guards the generator: a log that stopped
// exercising the interesting paths would make the determinism and snapshot
// tests vacuous.
func TestGeneratedLogCoverage(t *testing.T) {
	g := generate(testSeed(t), genLen)
	seen := map[string]int{}
	for i, e := range g.entries {
		r, err := DecodeResult(g.results[i])
		if err != nil {
			t.Fatal(err)
		}
		c, cerr := DecodeCommand(e)
		key := string(c.Op)
		switch {
		case cerr != nil:
			key = "undecodable"
		case c.Op == OpCreate && c.Lock != "":
			key += "/lock-" + string(c.Lock)
		case c.Op == OpCreate && c.Sequential:
			key += "/sequential"
		case c.Op == OpCreate && c.Ephemeral:
			key += "/ephemeral"
		}
		if r.Err == nil {
			key += " ok"
		} else {
			key += " " + string(r.Err.Code)
		}
		seen[key]++
		if r.Err == nil && r.Index != uint64(i+1) {
			seen["dedupe hit"]++
		}
		if r.WaitFor != "" {
			seen["lock wait"]++
		}
	}
	t.Logf("outcomes: %v", seen)
	for _, want := range []string{
		"open_session ok", "close_session ok", "expire_session ok", "expire_session not_leader",
		"leader_start ok", "ensure_prefix ok", "create ok", "create/ephemeral ok", "create/sequential ok",
		"create/lock-exclusive ok", "create/lock-shared ok", "put ok", "delete ok", "create node_exists",
		"delete not_empty", "put version_mismatch", "create session_expired", "undecodable bad_request",
		"dedupe hit", "lock wait", "leader_tick ok", "leader_tick not_leader", "confirm ok",
	} {
		if seen[want] == 0 {
			t.Errorf("generated log never produced %q", want)
		}
	}
}

// TestDeterminism: the same log applied to two fresh states gives identical
// results and changes per entry and identical snapshot bytes, at the end and
// at points along the way.
func TestDeterminism(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, testSeed(t)} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			g := generate(seed, genLen)
			a, b := newHarness(t), newHarness(t)
			for i := range g.entries {
				replay(t, a, g, i, i+1)
				replay(t, b, g, i, i+1)
				if i%500 == 0 && !bytes.Equal(a.snap(), b.snap()) {
					t.Fatalf("entry %d: snapshots differ", i)
				}
			}
			sa, sb, sr := a.snap(), b.snap(), snapBytes(t, g.final)
			if !bytes.Equal(sa, sb) || !bytes.Equal(sa, sr) {
				t.Fatalf("final snapshots differ (%d, %d, %d bytes)", len(sa), len(sb), len(sr))
			}
			// Writing twice gives the same bytes (no map order leaks).
			if !bytes.Equal(sa, a.snap()) {
				t.Fatal("two snapshots of one state differ")
			}
		})
	}
}

// TestChangesFireWatches ties Apply's change lists to WatchCheck: once a
// change to a path was reported at index i, a watch armed at since = i-1 on
// that path must fire, whatever happened afterwards.
func TestChangesFireWatches(t *testing.T) {
	g := generate(testSeed(t), genLen)
	checked := 0
	for _, chs := range g.changes {
		for _, ch := range chs {
			if ch.Path == "/" {
				continue // the root is not a node and cannot be watched
			}
			if ch.Type == ChangeLockDelay {
				continue // a delay's start fires no watch (its end does)
			}
			kind := api.WatchData
			if ch.Type == ChangeChildren {
				kind = api.WatchChildren
			}
			if _, fire := g.final.WatchCheck(ch.Path, kind, ch.Index-1); !fire {
				t.Fatalf("change %+v: %s watch since %d did not fire", ch, kind, ch.Index-1)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no changes in the generated log")
	}
}

// TestSnapshotRoundTrip: at several points of a generated log, the snapshot
// restores to a state that re-writes the same bytes and then answers the rest
// of the log exactly as the original does (which needs lock order, session
// ephemeral sets, dedupe windows, ended-session memory and sequence counters
// to be rebuilt), ending with the same bytes.
func TestSnapshotRoundTrip(t *testing.T) {
	g := generate(testSeed(t), genLen)
	for _, k := range []int{0, 1, 2, 100, genLen / 3, genLen / 2, genLen - 1, genLen} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			t.Parallel() // g is only read
			orig := newHarness(t)
			replay(t, orig, g, 0, k)
			b := orig.snap()
			rs := restore(t, b)
			if b2 := snapBytes(t, rs); !bytes.Equal(b, b2) {
				t.Fatalf("re-written snapshot differs:\n%s\n%s", b, b2)
			}
			if rs.Index() != orig.s.Index() || rs.Epoch() != orig.s.Epoch() || rs.NumNodes() != orig.s.NumNodes() ||
				!reflect.DeepEqual(rs.Sessions(), orig.s.Sessions()) {
				t.Fatal("restored state differs in its accessors")
			}
			restored := harnessOn(t, rs)
			replay(t, orig, g, k, len(g.entries))
			replay(t, restored, g, k, len(g.entries))
			if !bytes.Equal(orig.snap(), restored.snap()) {
				t.Fatal("final snapshots differ")
			}
		})
	}
}

// TestSnapshotRestoresDerivedState spells out, on a small state, each piece
// of structure the snapshot does not store and ReadSnapshot must rebuild.
func TestSnapshotRestoresDerivedState(t *testing.T) {
	h := newDemo(t)
	s1, s2 := h.open(), h.open()
	h.ok(createCmd("/demo/l"))
	w0 := h.ok(lockCmd(s1, "/demo/l", api.LockExclusive)).Node.Path
	r1 := h.ok(lockCmd(s2, "/demo/l", api.LockShared)).Node.Path
	w2 := h.ok(lockCmd(s2, "/demo/l", api.LockExclusive)).Node.Path
	h.ok(ephCmd(s1, "/demo/e1"))
	h.ok(ephCmd(s2, "/demo/e2"))
	h.ok(seqCmd("/demo/l/s-")) // counter of /demo/l now at 4
	seqRes := h.ok(req(seqCmd("/demo/x-"), s2, 1, 0))
	h.ok(req(createCmd("/demo/p"), s2, 2, 0))
	s3 := h.open()
	h.ok(closeCmd(s3))

	rs := harnessOn(t, restore(t, h.snap()))
	// Lock order.
	for _, c := range []struct {
		path    string
		held    bool
		waitFor string
	}{{w0, true, ""}, {r1, false, w0}, {w2, false, r1}} {
		exists, held, wf, tok := rs.s.LockState(c.path)
		if !exists || held != c.held || wf != c.waitFor {
			t.Errorf("LockState(%s) = %v %v %q, want held=%v waitFor=%q", c.path, exists, held, wf, c.held, c.waitFor)
		}
		if _, _, _, origTok := h.s.LockState(c.path); tok != origTok {
			t.Errorf("token of %s: %d, want %d", c.path, tok, origTok)
		}
	}
	// Sequence counters.
	if got := rs.ok(seqCmd("/demo/l/s-")).Node.Path; got != "/demo/l/s-0000000004" {
		t.Errorf("sequential after restore: %s", got)
	}
	// Dedupe window: the retry answers the same bytes and applies nothing.
	rs.apply(req(seqCmd("/demo/x-"), s2, 1, 0))
	if want := seqRes.Encode(); !bytes.Equal(rs.raw, want) {
		t.Errorf("retry after restore: %s, want %s", rs.raw, want)
	}
	// Ended-session memory.
	rs.fail(req(createCmd("/demo/z"), s3, 1, 0), api.CodeSessionExpired)
	// Session ephemeral sets: expiring s1 frees its lock and ephemeral only.
	rs.ok(expireCmd(s1, rs.s.Epoch()))
	for p, want := range map[string]bool{w0: false, "/demo/e1": false, "/demo/e2": true, r1: true, w2: true} {
		if _, ok := rs.s.Get(p); ok != want {
			t.Errorf("after expiry of s1: %s exists=%v, want %v", p, ok, want)
		}
	}
	if _, held, _, _ := rs.s.LockState(r1); !held {
		t.Errorf("reader %s should hold once the writer's session expired", r1)
	}
}
