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

// testWait bounds the waits of these tests (a failure, not a measure).
const testWait = 10 * time.Second

// TestCloseEndsServedWaits: a connection handed back to fasthttp whose
// client, answered, has not spoken since is closed by the owner's Close,
// not left waiting for a first request that fasthttp's Shutdown would
// give 5 s (the attack on parked KeepAlives, F2: a lockproxy's Close took
// 5 s longer). One whose request is in its handler is still answered.
func TestCloseEndsServedWaits(t *testing.T) {
	inHandler, finish := make(chan struct{}), make(chan struct{})
	closed := make(chan net.Conn, 2)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			close(inHandler)
			<-finish
			ctx.SetBodyString("ok\n")
		},
		KeepHijackedConns: true,
		ConnState: func(c net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateClosed {
				closed <- c
			}
		},
	}
	var cs Conns
	cs.Serve(srv.ServeConn)
	_, silent := connPair(t)
	busyClient, busy := connPair(t)
	cs.ServeAgain(silent, srv.ServeConn)
	cs.ServeAgain(busy, srv.ServeConn)
	if _, err := busyClient.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-inHandler
	cs.Close()
	select {
	case c := <-closed:
		if c != silent {
			t.Fatal("the connection in its handler closed first")
		}
	case <-time.After(testWait):
		t.Fatalf("a served connection whose client is silent still waits %v after Close", testWait)
	}
	close(finish)
	_ = busyClient.SetReadDeadline(time.Now().Add(testWait))
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(busyClient)); err != nil || string(resp.Body()) != "ok\n" {
		t.Fatalf("the request in its handler at Close: %v %q", err, resp.Body())
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cs.CloseServing()
}
