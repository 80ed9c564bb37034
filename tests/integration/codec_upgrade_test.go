package integration_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// codecWaitPolls bounds each wait of TestCodecUpgrade (100 ms apart).
const codecWaitPolls = 300

// newestCodec is the newest log codec of this build (fsm.LogCodecNewest:
// the binary codec with issue 26's vocabulary, issue 27's compares and
// the planned hand-over's entries).
const newestCodec = 4

// TestCodecUpgrade is a rolling upgrade of the log codec. Lockd 5 stands
// for a build from before the binary codec (--log-codec-max 0): while it
// is registered the directory's floor stays 0 and every cell writes JSON
// (every replica's cell at log_codec 0, no entry above it). Restarted as
// the new build, it advertises the newest: the directory's leader raises the floor,
// every cell commits set_codec and writes binary from then on; a lock
// taken before the switch is released after it, values written before
// read back after; a transaction with a compare (codec 3 vocabulary) is
// refused codec_too_old before the switch and applies after it. Then a
// lockd of the old build is refused registration (codec_too_old) and
// hosts no replica, and the cells go on without it.
func TestCodecUpgrade(t *testing.T) {
	t.Parallel()
	const old = 5
	c := cluster.Start(t, cluster.Options{Lease: 5 * time.Second, ReplicaArgs: map[int][]string{old: {"--log-codec-max", "0"}}})
	cl := c.NewClient()

	waitCodecs(t, "lockds 1-4 registered at the newest codec, lockd 5 at 0", func() (bool, string) {
		d := readDirectory(t, cl)
		got := map[uint64]uint8{}
		for _, l := range d.Lockds {
			got[l.ID] = l.LogCodec
		}
		n := uint8(newestCodec)
		want := map[uint64]uint8{1: n, 2: n, 3: n, 4: n, 5: 0}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("lockds at %v", got)
	})
	s := openSession(t, cl, "demo", 5*time.Second)
	s.keepAlive(time.Second)
	defer s.stop()
	held, err := s.acquire("/demo/up/lock")
	must(t, err)
	for i := range 10 {
		mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: fmt.Sprintf("/demo/up/k%d", i), Value: []byte(fmt.Sprint(i)), MakeParents: true}, nil)
	}
	cmpTxn := func() error {
		ctx, cancel := ctxFor(callTimeout)
		defer cancel()
		var resp api.TxnResponse
		err := cl.Do(ctx, api.RouteTxn, api.TxnRequest{WriteHeader: s.header(),
			If:   []api.TxnCond{{If: api.CondValue, Path: "/demo/up/k0", Cmp: api.CmpNotEqual, Value: []byte("txn")}},
			Then: []api.TxnOp{{Op: api.TxnPut, Path: "/demo/up/k0", Value: []byte("txn")}}}, &resp)
		if err == nil && !resp.Succeeded {
			return fmt.Errorf("compare txn refused: %+v", resp.Failed)
		}
		return err
	}
	if err := cmpTxn(); !isCode(err, api.CodeCodecTooOld) {
		t.Fatalf("a compare txn below codec 3: %v, want codec_too_old", err)
	}
	// The directory's leader checks every second: give it a few rounds in
	// which it must not raise the floor.
	for range 30 {
		checkCodecs(t, c, 0, 0)
		time.Sleep(100 * time.Millisecond)
	}

	must(t, c.SetReplicaArgs(old))
	must(t, c.Restart(old))
	waitCodecs(t, "the floor and every replica of every cell at the newest codec", func() (bool, string) {
		return codecsAre(c, newestCodec, newestCodec)
	})
	checkCodecs(t, c, newestCodec, newestCodec)
	must(t, s.release(&held))
	again, err := s.acquire("/demo/up/lock")
	must(t, err)
	if again.token <= held.token {
		t.Fatalf("token %d after the switch, %d before", again.token, held.token)
	}
	for i := range 10 {
		var got api.GetResponse
		mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: fmt.Sprintf("/demo/up/k%d", i)}, &got)
		if string(got.Node.Value) != fmt.Sprint(i) {
			t.Fatalf("k%d = %q after the switch", i, got.Node.Value)
		}
		mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: fmt.Sprintf("/demo/up/k%d", i), Value: []byte("after")}, nil)
	}
	must(t, cmpTxn())
	checkCodecs(t, c, newestCodec, newestCodec)

	// An old build is refused from now on.
	ctx, cancel := ctxFor(callTimeout)
	err = cl.Do(ctx, api.RouteAdminRegister, api.RegisterLockdRequest{LockdInfo: api.LockdInfo{ID: 9, RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}, nil)
	cancel()
	if !isCode(err, api.CodeCodecTooOld) {
		t.Fatalf("registering a lockd at codec 0 above the floor: %v, want codec_too_old", err)
	}
	must(t, c.SetReplicaArgs(old, "--log-codec-max", "0"))
	must(t, c.Restart(old))
	waitCodecs(t, "lockd 5 of the old build refused and hosting nothing", func() (bool, string) {
		ctx, cancel := ctxFor(callTimeout)
		defer cancel()
		st, err := c.Status(ctx, old)
		if err != nil {
			return false, err.Error()
		}
		refused := strings.Contains(c.LogTail(old, 200), string(api.CodeCodecTooOld))
		return refused && len(st.Cells) == 0, fmt.Sprintf("refused %v, %d cells", refused, len(st.Cells))
	})
	mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: "/demo/up/k0", Value: []byte("without 5")}, nil)
	must(t, s.release(&again))
	if d := readDirectory(t, cl); d.LogCodec != newestCodec {
		t.Fatalf("the floor fell to %d", d.LogCodec)
	}
}

// readDirectory is the directory as the cluster serves it.
func readDirectory(t *testing.T, cl *cluster.Client) api.DirectoryResponse {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	status, body, err := cl.Raw(ctx, http.MethodGet, api.RouteDirectory, nil)
	must(t, err)
	if status != http.StatusOK {
		t.Fatalf("directory: HTTP %d: %s", status, body)
	}
	var d api.DirectoryResponse
	must(t, json.Unmarshal(body, &d))
	return d
}

// codecsAre reports whether every lockd answering sees floor and every
// replica it runs is at cell codec, and none applied an entry above its
// cell's codec (then it says which).
func codecsAre(c *cluster.Cluster, floor, cell uint8) (bool, string) {
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	sts := c.Statuses(ctx)
	if len(sts) != len(c.IDs()) {
		return false, fmt.Sprintf("%d of %d lockds answer", len(sts), len(c.IDs()))
	}
	for id, st := range sts {
		if st.LogCodecFloor != floor {
			return false, fmt.Sprintf("lockd %d sees floor %d", id, st.LogCodecFloor)
		}
		for _, cs := range st.Cells {
			if cs.UngatedEntries != 0 {
				return false, fmt.Sprintf("UNGATED: lockd %d applied %d entries of %s above the cell's codec", id, cs.UngatedEntries, cs.Cell)
			}
			if cs.LogCodec != cell {
				return false, fmt.Sprintf("lockd %d: %s at codec %d", id, cs.Cell, cs.LogCodec)
			}
		}
	}
	return true, ""
}

// checkCodecs fails the test unless codecsAre.
func checkCodecs(t *testing.T, c *cluster.Cluster, floor, cell uint8) {
	t.Helper()
	if ok, why := codecsAre(c, floor, cell); !ok {
		t.Fatalf("want floor %d, cells at %d: %s", floor, cell, why)
	}
}

// waitCodecs polls cond until it holds (codecWaitPolls at most).
func waitCodecs(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	why := ""
	for range codecWaitPolls {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		if strings.HasPrefix(why, "UNGATED") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not reached: %s", what, why)
}
