package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestRestoreTakesDirectoryState restores a cell from a backup taken
// before the directory changed under it (issue 23, findings 3 and 4).
//
// Finding 3: cell dr served /dr and /other at the backup; /other then
// moved to cell3, where a holder locks /other/x. The restored dr must not
// serve /other again: a client whose directory predates the move (a raw
// request naming cell dr) is refused with wrong_cell or moved, never
// granted the lock the holder has on cell3.
//
// Finding 4: between the backup and the restore dr changed leader twice.
// The first leader epoch of the restored cell is above every epoch seen
// before it (a client's epochs only rise), and a client's cached value
// written after the backup is not served after the restore.
func TestRestoreTakesDirectoryState(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	c, admin := manyCells(t, "--backup-dir", store)
	lockd, err := cluster.Binary()
	must(t, err)
	ctx, cancel := ctxFor(6 * time.Minute)
	defer cancel()
	_, err = admin.CreateCell(ctx, api.CreateCellRequest{Name: "dr", Replicas: 3, On: []uint64{4, 5, 6}})
	must(t, err)
	for _, p := range []string{"/dr", "/other"} {
		_, err = admin.AssignPrefix(ctx, p, "dr")
		must(t, err)
	}
	_, err = admin.Put(ctx, "/dr/c", []byte("before"), sdk.MakeParents())
	must(t, err)
	_, err = admin.Put(ctx, "/other/keep", []byte("1"), sdk.MakeParents())
	must(t, err)

	// The cacher: its session is in the backup, so it lives on in the
	// restored cell; a long grace carries it through the restore.
	cacher, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), RequestTimeout: 5 * time.Second, Grace: 3 * time.Minute})
	must(t, err)
	defer cacher.Close()
	sess, err := cacher.Session(ctx, "dr")
	must(t, err)
	epochs := &epochLog{seen: []uint64{sess.Epoch()}}
	go epochs.follow(sess)
	_, err = cacher.Get(ctx, "/dr/c")
	must(t, err)

	b, err := admin.Backup(ctx, "dr")
	must(t, err)
	t.Logf("backup of dr at index %d, leader epoch %d", b.Index, drEpoch(t, c))

	// After the backup: two leader changes, a cached write, and /other
	// moves to cell3, where a holder takes /other/x.
	for i := 0; i < 2; i++ {
		transferLeader(t, c, "dr", []int{4, 5, 6})
	}
	_, err = cacher.Put(ctx, "/dr/c", []byte("after"))
	must(t, err)
	for i := 0; i < 2; i++ {
		got, err := cacher.Get(ctx, "/dr/c")
		must(t, err)
		if string(got.Value) != "after" {
			t.Fatalf("/dr/c = %q before the restore, want after", got.Value)
		}
	}
	if _, err := admin.MovePrefix(ctx, "/other", "cell3", nil); err != nil {
		t.Fatalf("move /other to cell3: %v", err)
	}
	holder := newSDKClient(t, c)
	m := holder.NewMutex("/other/x")
	must(t, m.Lock(ctx))
	before := maxCellEpoch(t, c, "dr")
	epochs.add(sess.Epoch())
	t.Logf("before the restore: leader epochs seen %v, highest in any replica %d", epochs.list(), before)

	restoreInPlace(t, c, admin, lockd, store, "dr", b.Index, []int{4, 5, 6})
	for attempt := 0; ; attempt++ {
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = admin.Get(gctx, "/dr/c")
		gcancel()
		if err == nil {
			break
		}
		if attempt == 60 {
			t.Fatalf("the restored cell does not serve: %v\n%s", err, c.LogTails(20))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Finding 4: the restored leader's epoch is above every earlier one.
	first := drEpoch(t, c)
	t.Logf("first leader epoch after the restore: %d (highest before: %d)", first, before)
	if first <= before {
		t.Errorf("finding 4: the restored cell's leader epoch %d is not above %d, seen before the restore", first, before)
	}
	waitEpochChange(t, sess, before)
	if got, err := cacher.Get(ctx, "/dr/c"); err != nil || string(got.Value) != "before" {
		t.Errorf("finding 4: /dr/c after the restore = %q (%v), want the backup's \"before\"", got.Value, err)
	}
	if seen := epochs.list(); !rising(seen) {
		t.Errorf("finding 4: the cacher's session saw leader epochs %v: a restore took it back", seen)
	}

	// Finding 3: the restored dr refuses /other to a client that still
	// routes it there; the holder on cell3 keeps its lock.
	code, body := onCell(t, c, "dr", []int{4, 5, 6}, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "dr", LeaseMS: 5000})
	if code != http.StatusOK {
		t.Fatalf("open a session on the restored dr: %d %s", code, body)
	}
	var sr api.SessionResponse
	must(t, json.Unmarshal(body, &sr))
	for _, probe := range []struct {
		route string
		req   any
	}{
		{api.RouteCreate, api.CreateRequest{WriteHeader: api.WriteHeader{Session: sr.Session, Secret: sr.Secret, Request: 1, Ack: 1},
			Path: "/other/x/n-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive, MakeParents: true}},
		{api.RouteGet, api.ReadRequest{Path: "/other/keep"}},
	} {
		code, body := onCell(t, c, "dr", []int{4, 5, 6}, probe.route, probe.req)
		e := cluster.DecodeError(code, body)
		if code/100 == 2 || (api.CodeOf(e) != api.CodeWrongCell && api.CodeOf(e) != api.CodeMoved) {
			t.Errorf("finding 3: %s of /other on the restored dr (it moved to cell3 after the backup): %d %s; want wrong_cell or moved", probe.route, code, body)
		}
	}
	if err := m.Context().Err(); err != nil {
		t.Errorf("the holder of /other/x on cell3 lost its lock: %v", err)
	}
	got, err := admin.Get(ctx, "/other/keep")
	if err != nil || string(got.Value) != "1" {
		t.Errorf("/other/keep on cell3 = %q (%v), want 1", got.Value, err)
	}
}

// epochLog records the leader epochs a session reports, in order.
type epochLog struct {
	mu   sync.Mutex
	seen []uint64
}

func (l *epochLog) add(e uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.seen); e != 0 && (n == 0 || l.seen[n-1] != e) {
		l.seen = append(l.seen, e)
	}
}

func (l *epochLog) list() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.seen...)
}

// follow records every fail-over the session reports until it ends.
func (l *epochLog) follow(s *sdk.Session) {
	for ev := range s.Events() {
		if ev.Type == sdk.SessionFailover {
			l.add(ev.Epoch)
		}
	}
}

func rising(es []uint64) bool {
	for i := 1; i < len(es); i++ {
		if es[i] <= es[i-1] {
			return false
		}
	}
	return true
}

// waitEpochChange waits until the session has seen a leader epoch other
// than old (its KeepAlives reached the restored leader).
func waitEpochChange(t *testing.T, s *sdk.Session, old uint64) {
	t.Helper()
	for i := 0; i < 600; i++ {
		if e := s.Epoch(); e != old && !s.InJeopardy() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the session still reports epoch %d (or jeopardy) a minute after the restore", s.Epoch())
}

// drEpoch is the leader epoch in the state of cell dr's leader.
func drEpoch(t *testing.T, c *cluster.Cluster) uint64 {
	t.Helper()
	for i := 0; i < 300; i++ {
		ctx, cancel := ctxFor(callTimeout)
		sts := c.Statuses(ctx)
		cancel()
		for _, st := range sts {
			for _, rs := range st.Cells {
				if rs.Cell == "dr" && rs.Role == "leader" && rs.Epoch > 0 {
					return rs.Epoch
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("cell dr has no leader with an epoch")
	return 0
}

// maxCellEpoch is the highest leader epoch any replica of cell reports.
func maxCellEpoch(t *testing.T, c *cluster.Cluster, cell string) uint64 {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	var best uint64
	for _, st := range c.Statuses(ctx) {
		for _, rs := range st.Cells {
			if rs.Cell == cell {
				best = max(best, rs.Epoch)
			}
		}
	}
	return best
}

// transferLeader moves cell's leadership to another of its lockds and
// waits until the new leader has started (its epoch rose).
func transferLeader(t *testing.T, c *cluster.Cluster, cell string, on []int) {
	t.Helper()
	old := drEpoch(t, c)
	leader := c.IDOf(leaderAPI(t, c, cell))
	to := on[0]
	if to == leader {
		to = on[1]
	}
	askCellLeader(t, c, cell, api.TransferRequest{Cell: cell, To: uint64(to)})
	for i := 0; i < 300; i++ {
		if e := drEpoch(t, c); e > old {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("cell %s: no new leader 30 s after a transfer to lockd %d", cell, to)
}

// leaderAPI is the API address of cell's leader.
func leaderAPI(t *testing.T, c *cluster.Cluster, cell string) string {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	for id, st := range c.Statuses(ctx) {
		for _, rs := range st.Cells {
			if rs.Cell == cell && rs.Role == "leader" {
				return c.APIAddr(id)
			}
		}
	}
	t.Fatalf("cell %s has no leader", cell)
	return ""
}

// restoreInPlace plans cell's restore from the backup at index on the
// lockds that host it, waits for them to stop their old replicas, and
// imports the backup on each in turn (stop, lockd restore, start), so
// that the other cells on them lose one replica at a time.
func restoreInPlace(t *testing.T, c *cluster.Cluster, admin *sdk.Client, lockd, store, cell string, index uint64, on []int) {
	t.Helper()
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	ids := make([]uint64, len(on))
	for i, id := range on {
		ids[i] = uint64(id)
	}
	plan, err := admin.RestoreCell(ctx, api.RestoreCellRequest{Cell: cell, BackupIndex: index, On: ids})
	must(t, err)
	t.Logf("restore plan: %+v", plan)
	for attempt := 0; ; attempt++ {
		running := false
		for _, id := range on {
			running = running || hosts(c, id, cell)
		}
		if !running {
			break
		}
		if attempt == 300 {
			t.Fatalf("the old replicas of %s still run 30 s after the restore plan", cell)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range on {
		must(t, c.Stop(id))
		args := append([]string{"restore", "--cell-name", cell, "--from", store}, c.ServeArgs(id)...)
		if out, err := runBounded(t, 2*time.Minute, lockd, args...); err != nil {
			t.Fatalf("lockd restore on lockd %d: %v\n%s", id, err, out)
		}
		must(t, c.Restart(id))
	}
}

// onCell sends req to route on cell's leader among the lockds on, naming
// the cell in the Lockd-Cell header as a client routing by its own
// (possibly stale) directory does, and returns the leader's answer.
func onCell(t *testing.T, c *cluster.Cluster, cell string, on []int, route string, req any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(req)
	must(t, err)
	var last string
	for attempt := 0; attempt < 100; attempt++ {
		for _, id := range on {
			hr, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s://%s%s", c.Scheme(), c.APIAddr(id), route), bytes.NewReader(b))
			must(t, err)
			hr.Header.Set(api.HeaderCell, cell)
			hr.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				last = err.Error()
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				last = string(body)
				continue // not the leader, or starting
			}
			return resp.StatusCode, body
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader of %s answered %s: %s", cell, route, strings.TrimSpace(last))
	return 0, nil
}
