package httpapi

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkHotConnection: requests back to back on one connection, with
// idle connections parked and without (the hand-over must cost a busy
// connection nothing): go test -run '^$' -bench HotConnection -count 5
// ./server/httpapi/ (bench/RESULTS.md, Memory).
func BenchmarkHotConnection(b *testing.B) {
	for _, park := range []bool{false, true} {
		name := map[bool]string{false: "fasthttp", true: "parking"}[park]
		b.Run(name, func(b *testing.B) {
			s := wireTestServer(&testing.T{})
			srv := &fasthttp.Server{Handler: s.Handler, ReduceMemoryUsage: true, KeepHijackedConns: true, StreamRequestBody: true}
			s.ServeConns(srv.ServeConn)
			if park {
				if err := s.ParkIdleConns(time.Minute); err != nil {
					b.Fatal(err)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			defer func() { s.Close(); _ = srv.Shutdown() }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			var resp fasthttp.Response
			req := []byte(healthReq)
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if err := resp.Read(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
