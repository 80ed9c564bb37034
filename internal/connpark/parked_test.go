package connpark

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// sinkConn takes every write and never closes (a connection whose answer
// is written at once).
type sinkConn struct{ net.Conn }

func (sinkConn) Write(b []byte) (int, error)      { return len(b), nil }
func (sinkConn) SetWriteDeadline(time.Time) error { return nil }
func (sinkConn) Close() error                     { return nil }

// TestParkedAttachAnswerRace: an answer racing the hijack's attach is
// written once, counted once, and leaves nothing recorded as parked.
func TestParkedAttachAnswerRace(t *testing.T) {
	var cs Conns
	cs.Serve(func(c net.Conn) error { return c.Close() })
	defer cs.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := map[*Parked]int{}
	const n = 20_000
	for range n {
		p := &Parked{cs: &cs}
		p.ended = func(string) { mu.Lock(); ended[p]++; mu.Unlock() }
		start := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p.Answer(fasthttp.AcquireResponse(), "ok")
		}()
		close(start)
		p.attach(sinkConn{})
	}
	wg.Wait()
	for range 100 {
		mu.Lock()
		done := len(ended)
		mu.Unlock()
		if cs.Held() == 0 && done == n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if cs.Held() != 0 || len(ended) != n {
		t.Fatalf("%d answered requests still recorded as parked, %d of %d ended", cs.Held(), len(ended), n)
	}
	for _, k := range ended {
		if k != 1 {
			t.Fatalf("a parked request ended %d times", k)
		}
	}
}
