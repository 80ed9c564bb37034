package connpark

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestReadWhole: a connection is parked only after a request whose body
// is certainly read whole.
func TestReadWhole(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(r *fasthttp.Request)
		want bool
	}{
		{"no body", func(r *fasthttp.Request) {}, true},
		{"no length (a GET)", func(r *fasthttp.Request) { r.Header.SetContentLength(-2) }, true},
		{"read whole", func(r *fasthttp.Request) { r.SetBody([]byte("0123456789")) }, true},
		{"still a stream", func(r *fasthttp.Request) { r.SetBodyStream(strings.NewReader("0123456789"), 10) }, false},
		{"chunked", func(r *fasthttp.Request) { r.SetBodyStream(strings.NewReader("0123456789"), -1) }, false},
		{"shorter than announced", func(r *fasthttp.Request) {
			r.SetBody([]byte("01234"))
			r.Header.SetContentLength(10)
		}, false},
	} {
		var r fasthttp.Request
		tc.make(&r)
		if got := readWhole(&r); got != tc.want {
			t.Errorf("%s: readWhole %v, want %v (length %d, stream %v)", tc.name, got, tc.want, r.Header.ContentLength(), r.IsBodyStream())
		}
	}
}

// TestParkAfter: a new connection is parked after its first request; one
// served again after its first if it was parked at least IdleGap,
// after a later one if its client was silent at least IdleGap before
// it (not a long poll's, however long it was held, nor a busy client's);
// one the poller could not take, never.
func TestParkAfter(t *testing.T) {
	woken := func(parked, gap time.Duration) connIdle {
		return connIdle{woken: true, parked: parked, gap: gap}
	}
	for _, tc := range []struct {
		name   string
		reqNum uint64
		ci     connIdle
		want   bool
	}{
		{"new, first", 1, connIdle{}, true},
		{"new, second", 2, connIdle{}, false},
		{"the poller could not take it", 1, connIdle{noPark: true}, false},
		{"woken at once", 1, woken(time.Millisecond, 0), false},
		{"woken after a pause", 1, woken(IdleGap, 0), true},
		{"a long poll, sent as soon as answered", 2, woken(time.Millisecond, time.Millisecond), false},
		{"a short pause", 2, woken(time.Millisecond, IdleGap/2), false},
		{"a pause as long as the gap", 2, woken(time.Millisecond, IdleGap), true},
		{"a sparse client after many", 11, woken(time.Millisecond, 4*IdleGap), true},
		{"the poller could not take it, later", 11, connIdle{noPark: true, woken: true, gap: time.Hour}, false},
	} {
		if got := parkAfter(tc.reqNum, tc.ci); got != tc.want {
			t.Errorf("%s: parkAfter(%d, %+v) = %v, want %v", tc.name, tc.reqNum, tc.ci, got, tc.want)
		}
	}
}
