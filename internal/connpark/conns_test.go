package connpark

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestNothingServedAfterClose: a connection handed back to fasthttp
// (ServeAgain: a parked KeepAlive answered, an idle one woken) after the
// owner's Close is closed, not served; one handed back just before, whose
// ServeConn begins only after the server's Shutdown returned (fasthttp
// then neither knows of it nor refuses it), is closed by CloseServing. A
// stopped lockd or lockproxy answering on, and a listener slot never
// freed, was the attack review's finding (2026-12-07).
func TestNothingServedAfterClose(t *testing.T) {
	for _, racing := range []bool{false, true} {
		t.Run(map[bool]string{false: "handed back after Close", true: "handed back racing Close"}[racing], func(t *testing.T) {
			srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok\n") },
				KeepHijackedConns: true, CloseOnShutdown: true}
			release := make(chan struct{})
			serve := func(c net.Conn) error {
				<-release // the hand-back's goroutine, descheduled
				return srv.ServeConn(c)
			}
			var cs Conns
			cs.Serve(serve)
			client, server := connPair(t)
			if racing {
				cs.ServeAgain(server, serve)
				cs.Close()
				if err := srv.Shutdown(); err != nil {
					t.Fatal(err)
				}
				cs.CloseServing()
				close(release)
			} else {
				close(release)
				cs.Close()
				if err := srv.Shutdown(); err != nil {
					t.Fatal(err)
				}
				cs.ServeAgain(server, serve)
				cs.CloseServing()
			}
			_ = client.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := client.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				return // closed: good
			}
			var resp fasthttp.Response
			if err := resp.Read(bufio.NewReader(client)); err == nil {
				t.Fatalf("a connection handed back to a closed server was served: %d %q", resp.StatusCode(), resp.Body())
			}
		})
	}
}

// connPair is a loopback TCP connection's two ends.
func connPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}
