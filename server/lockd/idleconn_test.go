package lockd

import (
	"bufio"
	"net"
	"runtime"
	"testing"

	"github.com/valyala/fasthttp"
)

// idleConns is how many keep-alive connections TestIdleConnCost holds.
const idleConns = 1000

// maxIdleConnBytes bounds an idle connection's cost while fasthttp holds
// it, as measured here (both ends): 11.7 KB with ReduceMemoryUsage, 15.9
// KB without: fasthttp's 4 KB read buffer, which it keeps between
// requests when StreamRequestBody is on, and the connection's goroutine
// stack (bench/RESULTS.md, Memory). A lockd on Linux parks a connection
// its client uses sparsely instead (server/httpapi TestIdleParkedConnCost:
// under 1 KB over plain HTTP); this is what a busy one, and one
// elsewhere, costs.
const maxIdleConnBytes = 13 << 10

// inuse is the heap and the goroutine stacks in use after a collection.
func inuse() (heap, stacks int64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse), int64(m.StackInuse)
}

// TestIdleConnCost opens idleConns keep-alive connections to the API's
// HTTP server (newHTTPServer, over a trivial handler), one request on
// each, and reports what they hold once idle: heap and stacks, per
// connection, both ends (the client's sockets too: an upper bound).
func TestIdleConnCost(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a thousand connections")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	heap0, stacks0 := inuse()
	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	req := []byte("GET /v1/health HTTP/1.1\r\nHost: lockd\r\n\r\n")
	for range idleConns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		resp := fasthttp.AcquireResponse()
		if err := resp.Read(bufio.NewReaderSize(c, 256)); err != nil {
			t.Fatal(err)
		}
		fasthttp.ReleaseResponse(resp)
	}
	heap, stacks := inuse()
	per := (heap - heap0 + stacks - stacks0) / idleConns
	t.Logf("%d idle keep-alive connections: %d B each (heap %d + stacks %d; both ends)", idleConns, per, (heap-heap0)/idleConns, (stacks-stacks0)/idleConns)
	if per > maxIdleConnBytes && !raceEnabled {
		t.Errorf("an idle connection costs %d B, bound %d", per, maxIdleConnBytes)
	}
}
