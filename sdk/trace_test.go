package sdk

import (
	"context"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestTraceStages: the client's stages around the server's: the network
// is the exchange less the server's total (all of it without one), and
// the server's total itself is not repeated.
func TestTraceStages(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		tr   Trace
		want string
	}{
		{"server answered", Trace{Encode: 1 * ms, RoundTrip: 10 * ms, Decode: 2 * ms,
			Server: []api.TimingStage{{Name: api.StageDecode, Dur: ms}, {Name: api.StageCommit, Dur: 5 * ms}, {Name: api.StageTotal, Dur: 7 * ms}}},
			"client_encode;dur=1.000, http;dur=3.000, decode;dur=1.000, commit;dur=5.000, client_decode;dur=2.000"},
		{"no Server-Timing", Trace{Encode: ms, RoundTrip: 4 * ms, Decode: ms},
			"client_encode;dur=1.000, http;dur=4.000, client_decode;dur=1.000"},
		{"a total past the exchange (clock skew between stages)", Trace{RoundTrip: ms, Server: []api.TimingStage{{Name: api.StageTotal, Dur: 2 * ms}}},
			"client_encode;dur=0.000, http;dur=1.000, client_decode;dur=0.000"},
	} {
		if got := api.FormatStages(tc.tr.Stages()); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestTraceRecording: a call begins afresh, attempts count, a malformed
// Server-Timing is dropped, and a nil trace records nothing.
func TestTraceRecording(t *testing.T) {
	var none *Trace
	none.begin()
	none.encoded(none.now())
	none.decoded(none.now())
	tr := &Trace{Attempts: 3, Server: []api.TimingStage{{Name: "old", Dur: 1}}}
	if traceOf(WithTrace(context.Background(), tr)) != tr || traceOf(context.Background()) != nil {
		t.Fatal("the context does not carry the trace")
	}
	tr.begin()
	if tr.Calls != 1 || tr.Attempts != 0 || tr.Server != nil {
		t.Fatalf("after begin: %+v", tr)
	}
	tr.encoded(tr.now())
	tr.exchanged(time.Now(), []byte("commit;dur=2, total;dur=3"))
	if tr.Attempts != 1 || len(tr.Server) != 2 {
		t.Fatalf("after one attempt: %+v", tr)
	}
	tr.exchanged(time.Now(), []byte("commit;dur=fast"))
	if tr.Server != nil {
		t.Fatalf("a malformed Server-Timing kept: %v", tr.Server)
	}
}

// TestTraceAttempts: a traced call records each attempt in order: where
// it went, its reply's status and code, the leader a not_leader reply
// named; an attempt without a reply, its error; and a new call starts
// afresh.
func TestTraceAttempts(t *testing.T) {
	fc := newFakeCell(t, 3)
	c := newTestClient(t, fc, nil)
	ctx := testCtx(t)
	if _, err := c.Put(ctx, "/demo/warm", nil); err != nil { // the client learns the leader
		t.Fatal(err)
	}
	fc.SetHint(true)
	fc.failover(2) // the client still takes replica 0 to lead
	tr := &Trace{}
	if _, err := c.Put(WithTrace(ctx, tr), "/demo/x", []byte("v")); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr   string
		status int
		code   api.Code
		hint   string
	}{{fc.addr(0), api.CodeNotLeader.HTTPStatus(), api.CodeNotLeader, fc.addr(2)}, {fc.addr(2), 200, "", ""}}
	if len(tr.Tries) != len(want) || tr.Attempts != len(want) {
		t.Fatalf("tries %v (%d attempts), want %d", tr.Tries, tr.Attempts, len(want))
	}
	for i, w := range want {
		got := tr.Tries[i]
		if got.Addr != w.addr || got.Status != w.status || got.Code != w.code || got.Hint != w.hint || got.Sent.IsZero() || got.Err != "" {
			t.Errorf("try %d: %+v (%s), want %+v", i, got, got, w)
		}
	}
	fc.close()
	short, cancel := context.WithTimeout(WithTrace(ctx, tr), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Put(short, "/demo/y", nil); err == nil {
		t.Fatal("a put to a closed cell succeeded")
	}
	if tr.Calls != 2 || len(tr.Tries) == 0 || tr.Tries[0].Status != 0 || tr.Tries[0].Err == "" {
		t.Fatalf("a call without a reply: %d calls, tries %v", tr.Calls, tr.Tries)
	}
}
