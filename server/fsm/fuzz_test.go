package fsm

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/lockservice/lockd/api"
)

// fuzzPaths is the small path alphabet of FuzzApply: nested directories, a
// lock directory, names that become sequential, a second and third prefix,
// bad paths and prefix roots.
var fuzzPaths = []string{
	"/p/a", "/p/a/b", "/p/a/b/c", "/p/l", "/p/l/k-", "/p/a/s-", "/p/e", "/p/e/x/y",
	"/q/a", "/q/a/b", "/r/x/y", "/p", "/q", "/p//a", "/p/a/..", "/p/a/b/c/d/e",
}

var fuzzPrefixes = []string{"/p", "/q", "/r"}

// fuzzMaxEntries bounds one input's log, and so the cost of one exec.
const fuzzMaxEntries = 256

// fuzzDriver turns fuzz bytes into log entries, aimed by looking at the
// reference state (its sessions and epoch). Missing bytes read as zero.
type fuzzDriver struct {
	data     []byte
	ref      *State
	sessions []uint64
}

func (d *fuzzDriver) byte() byte {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return b
}

// session is mostly a live one, sometimes any ever opened (likely ended),
// rarely one never seen.
func (d *fuzzDriver) session(b byte) uint64 {
	live := d.ref.Sessions()
	switch {
	case b%8 == 7 || len(d.sessions) == 0:
		return 1<<40 + uint64(b%2)
	case b%8 < 5 && len(live) > 0:
		return live[int(b/8)%len(live)].ID
	default:
		return d.sessions[int(b/8)%len(d.sessions)]
	}
}

// A tenant with a small quota, so fuzzing reaches it.
var (
	fuzzSecret = "s3cret"
	fuzzTenant = "team-a"
	fuzzQuota  = api.Quota{Sessions: 3, Nodes: 6, Bytes: 120}
)

func (d *fuzzDriver) header(c *Command) {
	b := d.byte()
	if b&3 == 0 {
		return
	}
	c.Session = d.session(b >> 2)
	// Mostly the session's secret; sometimes a wrong one (refused,
	// nothing applied). Sometimes from an admin, who may change another
	// session's ephemeral node; sometimes from a tenant with a quota.
	f := d.byte()
	c.Secret = fuzzSecret
	if f&7 == 0 {
		c.Secret = "guess"
	}
	c.Admin = f&8 != 0
	if f&16 != 0 {
		c.Tenant, c.Quota = fuzzTenant, &fuzzQuota
	}
	if b&3 == 1 {
		return // session, no request id
	}
	c.Request = uint64(d.byte() % 16)
	if b&3 == 3 {
		c.Ack = uint64(d.byte() % 8)
	}
}

// version is none, 0, the node's current version, or a small constant.
func (d *fuzzDriver) version(b byte, path string) *uint64 {
	switch b % 4 {
	case 0:
		return nil
	case 1:
		return u64(0)
	default:
		v := uint64(b / 4 % 4)
		if n, ok := d.ref.Get(path); ok && b%4 == 2 {
			v = n.Version
		}
		return &v
	}
}

func (d *fuzzDriver) next() []byte {
	var c Command
	switch op := d.byte() % 15; op {
	case 0:
		b := d.byte()
		c = Command{Op: OpOpenSession, LeaseMS: int64(b&0x7f) * 100}
		c.Secret = fuzzSecret
		if b&0x80 != 0 {
			c.Tenant, c.Quota = fuzzTenant, &fuzzQuota
		}
	case 1:
		c = Command{Op: OpCloseSession}
		c.Session = d.session(d.byte())
	case 2:
		b := d.byte()
		c = Command{Op: OpExpireSession, Target: d.session(b), Epoch: d.ref.Epoch()}
		if b&0x80 != 0 {
			c.Epoch += uint64(b>>5&1)*2 - 1 // one off: refused
		}
	case 3:
		c = Command{Op: OpLeaderStart, ReplicaID: uint64(d.byte() % 3), Term: uint64(d.byte())}
	case 4:
		b := d.byte()
		c = ensureCmd(fuzzPrefixes[int(b)%len(fuzzPrefixes)], uint64(b>>4%4))
	case 5, 6, 7:
		f, p, g := d.byte(), d.byte(), d.byte()
		c = Command{Op: OpCreate, Path: fuzzPaths[int(p)%len(fuzzPaths)],
			Ephemeral: f&1 != 0, Sequential: f&2 != 0, MakeParents: f&16 != 0}
		c.Lock = []api.LockMode{api.LockNone, api.LockExclusive, api.LockShared, api.LockNone}[f>>2&3]
		if c.Lock != api.LockNone && g&0x20 == 0 { // mostly a well-formed lock node in the lock dir
			c.Ephemeral, c.Sequential = true, true
			if g&0x40 == 0 {
				c.Path = "/p/l/k-"
			}
			if g&0x80 != 0 {
				c.LockDelayMS = 1000 // its holder's end starts a lock-delay
			}
		}
		switch {
		case g == 0xff: // rare: decoding it dominates an exec's cost
			c.Value = make([]byte, api.MaxValueSize+1)
		case g&0xf == 0xe:
			c.Lock = "bogus"
		case g&0x10 != 0:
			c.Value = []byte{f, g}
		}
		d.header(&c)
	case 8, 9:
		f := d.byte()
		c = Command{Op: OpPut, Path: fuzzPaths[int(d.byte())%len(fuzzPaths)], Value: []byte{f}, MakeParents: f&1 != 0}
		c.Version = d.version(f>>1, c.Path)
		d.header(&c)
	case 10:
		f := d.byte()
		c = Command{Op: OpDelete, Path: fuzzPaths[int(d.byte())%len(fuzzPaths)]}
		c.Version = d.version(f, c.Path)
		d.header(&c)
	case 12:
		b := d.byte()
		c = Command{Op: OpLeaderTick, Epoch: d.ref.Epoch(), ElapsedMS: int64(b) * 250}
		if b&0x80 != 0 && b&0x40 != 0 {
			c.Epoch++ // refused
		}
	case 13:
		b := d.byte()
		c = Command{Op: OpConfirm, Epoch: d.ref.Epoch()}
		for i := range b % 4 {
			c.Sessions = append(c.Sessions, d.session(d.byte()+i))
		}
		if b&0x80 != 0 && b&0x40 != 0 {
			c.Epoch++ // refused
		}
	case 14:
		c = d.endDelay(d.byte())
	default: // 11, raw bytes: mostly undecodable
		n := int(d.byte() % 8)
		raw := make([]byte, 0, n)
		for range n {
			raw = append(raw, d.byte())
		}
		return raw
	}
	return c.Encode()
}

// endDelay is mostly the end of a lock-delay in force (on a directory, or
// kept for one deleted), sometimes one naming another release.
func (d *fuzzDriver) endDelay(b byte) Command {
	ds := d.ref.LockDelays()
	if len(ds) == 0 {
		return Command{Op: OpEndLockDelay, Path: "/p/l", Since: uint64(b)}
	}
	ld := ds[int(b&0x3f)%len(ds)]
	c := Command{Op: OpEndLockDelay, Path: ld.Dir, Since: ld.Since}
	if b&0xc0 == 0xc0 {
		c.Since-- // an earlier release: nothing
	}
	return c
}

// FuzzApply decodes fuzz bytes into commands over a small path alphabet and
// applies them with the invariants checked after every entry. Halfway
// through it snapshots and restores; the restored state must answer the
// rest exactly as the original, a fresh state replaying everything must end
// byte-identical, and the final snapshot must round-trip.
func FuzzApply(f *testing.F) {
	f.Add([]byte{})
	// Byte layout: see fuzzDriver.next. Locks and expiry: open, create /p/l,
	// exclusive lock, open, shared lock on the second session (waits),
	// expire the first (current epoch), leader_start, a stale expiry, a
	// make_parents create.
	f.Add([]byte{
		0, 10, 5, 0x00, 3, 0x00, 0x00, 5, 0x04, 0, 0x00, 0x01, 0, 10, 5, 0x08, 0, 0x00, 0x21,
		2, 0x00, 3, 1, 1, 2, 0x80, 5, 0x10, 2, 0x00, 0x00,
	})
	// Ephemeral /p/e, make_parents below it (refused), put /p/a, CAS put at
	// the current version, put version 0 on it (node_exists), delete at the
	// current version.
	f.Add([]byte{
		0, 10, 5, 0x01, 6, 0x00, 0x01, 5, 0x10, 7, 0x00, 0x00, 8, 0x00, 0, 0x00, 8, 0x04, 0, 0x00,
		8, 0x06, 0, 0x00, 10, 0x02, 0, 0x00,
	})
	// Dedupe: a sequential create with request 3 (make_parents), its retry,
	// request 4 acking below 4, then request 3 again (stale).
	f.Add([]byte{
		0, 10, 5, 0x12, 5, 0x00, 0x02, 3, 5, 0x12, 5, 0x00, 0x02, 3, 5, 0x12, 5, 0x00, 0x03, 4, 4,
		5, 0x12, 5, 0x00, 0x02, 3,
	})
	rng := rand.New(rand.NewSource(1))
	for range 6 {
		b := make([]byte, 200+rng.Intn(300))
		rng.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzApply(t, data) })
}

func fuzzApply(t testing.TB, data []byte) {
	d := &fuzzDriver{data: data}
	ref := newHarness(t)
	d.ref = ref.s
	ref.ok(ensureCmd("/p", 1))
	var (
		entries, results [][]byte
		mid              = -1
		midSnap          []byte
	)
	for len(d.data) > 0 && len(entries) < fuzzMaxEntries {
		if mid < 0 && len(d.data) <= len(data)/2 {
			mid, midSnap = len(entries), ref.snap()
		}
		e := d.next()
		r := ref.applyBytes(e)
		if r.Err == nil && r.Session == ref.idx {
			d.sessions = append(d.sessions, r.Session)
		}
		entries = append(entries, e)
		results = append(results, ref.raw)
	}
	if mid < 0 {
		mid, midSnap = len(entries), ref.snap()
	}
	final := ref.snap()

	// Snapshot halfway, continue on the restored state.
	rs := harnessOn(t, restore(t, midSnap))
	if !bytes.Equal(midSnap, rs.snap()) {
		t.Fatal("mid snapshot does not re-write to the same bytes")
	}
	for i := mid; i < len(entries); i++ {
		rs.applyBytes(entries[i])
		if !bytes.Equal(rs.raw, results[i]) {
			t.Fatalf("entry %d after restore: %s, want %s", i, rs.raw, results[i])
		}
	}
	if !bytes.Equal(final, rs.snap()) {
		t.Fatal("restored state ends with different bytes")
	}
	// Determinism: a fresh replay ends the same. (Plain Apply: the
	// reference already checked the invariants of these very states.)
	fresh := New()
	ens := ensureCmd("/p", 1)
	fresh.Apply(1, ens.Encode())
	for i, e := range entries {
		if res, _ := fresh.Apply(uint64(i+2), e); !bytes.Equal(res, results[i]) {
			t.Fatalf("entry %d on a fresh state: %s, want %s", i, res, results[i])
		}
	}
	if !bytes.Equal(final, snapBytes(t, fresh)) {
		t.Fatal("fresh replay ends with different bytes")
	}
	// Final round trip.
	if !bytes.Equal(final, snapBytes(t, restore(t, final))) {
		t.Fatal("final snapshot does not round-trip")
	}
}

// FuzzReadSnapshot feeds mangled snapshots to ReadSnapshot: it must never
// panic, and a snapshot it accepts gives a consistent state that re-writes
// stably and survives every session expiring.
func FuzzReadSnapshot(f *testing.F) {
	f.Add([]byte{})
	f.Add(snapBytes(f, New()))
	f.Add(snapFixture(f).snap())
	f.Add(snapBytes(f, generate(7, 200).final))
	// A lock directory deleted in its lock-delay: the delay kept.
	h := newDemo(f)
	h.ok(createCmd("/demo/l"))
	sess := h.open()
	h.ok(delayedLockCmd(sess, "/demo/l", ex, 5000))
	h.ok(expireCmd(sess, h.s.Epoch()))
	h.ok(delCmd("/demo/l", nil))
	f.Add(h.snap())
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("accepted an inconsistent snapshot: %v", err)
		}
		b1 := snapBytes(t, s)
		b2 := snapBytes(t, restore(t, b1))
		if !bytes.Equal(b1, b2) {
			t.Fatal("re-written snapshot is not stable")
		}
		if s.Index() > 1<<62 {
			return // Apply needs a higher index next
		}
		h := harnessOn(t, s)
		for _, info := range s.Sessions() {
			h.apply(expireCmd(info.ID, s.Epoch()))
		}
	})
}
