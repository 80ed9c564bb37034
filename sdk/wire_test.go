package sdk

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// TestKeepAliveEncoding: KeepAlives go in the binary encoding by default;
// in JSON with Config.JSONKeepAlives; and to a server older than the
// encoding (it refuses the body bad_request) once in binary, then in JSON
// at once and for wireRetryAfter, the session renewed throughout.
func TestKeepAliveEncoding(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noWire    bool // the fake is a lockd older than the encoding
		json      bool // Config.JSONKeepAlives
		wantWire  func(n int) int
		remembers bool
	}{
		{name: "binary by default", wantWire: func(n int) int { return n }},
		{name: "JSON when configured", json: true, wantWire: func(int) int { return 0 }},
		{name: "old server: JSON after one refusal", noWire: true, wantWire: func(int) int { return 1 }, remembers: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fc := startFakeCell(t, fake.Options{Replicas: 1, Memory: true, NoWire: tc.noWire})
				c := newTestClient(t, fc, func(cfg *Config) { cfg.JSONKeepAlives = tc.json })
				ctx := testCtx(t)
				if _, err := c.Create(ctx, "/demo/e", nil, Ephemeral()); err != nil {
					t.Fatal(err)
				}
				const rounds = 4
				waitFor(t, "keepalives", func() bool { return len(fc.Requests(api.RouteSessionKeepAlive)) >= rounds })
				kas := fc.Requests(api.RouteSessionKeepAlive)
				wire := 0
				for _, r := range kas {
					if r.Wire {
						wire++
					}
				}
				if want := tc.wantWire(len(kas)); wire != want {
					t.Fatalf("%d of %d KeepAlives in binary, want %d", wire, len(kas), want)
				}
				if tc.noWire && !kas[0].Wire {
					t.Fatal("the first KeepAlive to an old server did not try binary")
				}
				if got := c.wire.refused(fc.addr(0), time.Now()); got != tc.remembers {
					t.Fatalf("endpoint remembered as JSON-only: %v, want %v", got, tc.remembers)
				}
				if _, err := c.Create(ctx, "/demo/f", nil, Ephemeral()); err != nil {
					t.Fatalf("the session is not alive: %v", err)
				}
			})
		})
	}
}

// TestWireRefusal: which replies to a binary request are refusals of the
// encoding (pure).
func TestWireRefusal(t *testing.T) {
	badJSON := []byte(`{"error":{"code":"bad_request","message":"malformed JSON body"}}`)
	gone := []byte(`{"error":{"code":"session_expired"}}`)
	for _, tc := range []struct {
		name string
		r    attemptResult
		want bool
	}{
		{"400 bad_request to binary", attemptResult{wire: true, status: 400, body: badJSON}, true},
		{"415 to binary", attemptResult{wire: true, status: 415, body: []byte("unsupported")}, true},
		{"400 to JSON", attemptResult{status: 400, body: badJSON}, false},
		{"410 to binary", attemptResult{wire: true, status: 410, body: gone}, false},
		{"200 to binary", attemptResult{wire: true, status: 200}, false},
		{"400 without an error body", attemptResult{wire: true, status: 400, body: []byte("bad")}, false},
	} {
		if got := wireRefusal(tc.r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A refusal of the binary encoding is remembered for wireRetryAfter, then
// forgotten: an endpoint upgraded since gets binary again.
func TestWireRefusalExpires(t *testing.T) {
	var w wireEndpoints
	t0 := time.Unix(1_000, 0)
	if !w.remember("a:1", t0) || w.remember("a:1", t0) {
		t.Fatal("remember: first true, second false")
	}
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{
		{0, true},
		{wireRetryAfter - time.Second, true},
		{wireRetryAfter, false},
	} {
		if got := w.refused("a:1", t0.Add(tc.after)); got != tc.want {
			t.Errorf("%v after the refusal: refused = %v, want %v", tc.after, got, tc.want)
		}
	}
	if w.refused("a:1", t0) {
		t.Error("an expired refusal must be forgotten, not revived")
	}
}
