package httpapi

import (
	"testing"
	"time"
)

// TestWriteLimiter: a tenant gets its rate (a second's burst, then the
// rate), and one tenant's use leaves another's bucket full.
func TestWriteLimiter(t *testing.T) {
	var l writeLimiter
	now := time.Unix(1000, 0)
	passed := 0
	for i := 0; i < 10; i++ {
		if ok, _ := l.allow("burst", 5, now); ok {
			passed++
		}
	}
	if passed != 5 {
		t.Fatalf("a burst of 10 at 5/s: %d passed, want 5", passed)
	}
	for i := 0; i < 5; i++ {
		if ok, _ := l.allow("a", 5, now); !ok {
			t.Fatalf("write %d of a second's 5 refused", i+1)
		}
	}
	if ok, _ := l.allow("b", 5, now); !ok {
		t.Fatal("another tenant is held to a's bucket")
	}
	// 0.1 s on: half a token; the refusal owes one more, so the next
	// write passes 0.3 s later, not 0.1 s.
	ok, wait := l.allow("a", 5, now.Add(100*time.Millisecond))
	if ok || wait < 290*time.Millisecond || wait > 310*time.Millisecond {
		t.Fatalf("0.1 s after the bucket emptied at 5/s: ok %v, next in %v (want refused, next in 0.3 s)", ok, wait)
	}
	if ok, _ := l.allow("a", 5, now.Add(300*time.Millisecond)); ok {
		t.Fatal("a write passed before the refusal's debt was paid")
	}
	if ok, _ := l.allow("a", 5, now.Add(100*time.Millisecond+wait+250*time.Millisecond)); !ok {
		t.Fatal("no write passed once the bucket refilled")
	}
}

// TestLogLimiter: a burst per key per second, the rest counted and
// reported with the next line.
func TestLogLimiter(t *testing.T) {
	var l logLimiter
	now := time.Unix(1000, 0)
	logged := 0
	for i := 0; i < 100; i++ {
		if ok, _ := l.allow("quota_exceeded", now); ok {
			logged++
		}
	}
	if logged != refusalLogBurst {
		t.Fatalf("100 refusals in a second: %d logged, want %d", logged, refusalLogBurst)
	}
	if ok, _ := l.allow("forbidden", now); !ok {
		t.Fatal("another code is held to quota_exceeded's budget")
	}
	ok, missed := l.allow("quota_exceeded", now.Add(time.Second))
	if !ok || missed != 100-refusalLogBurst {
		t.Fatalf("next second: ok %v, missed %d, want %d", ok, missed, 100-refusalLogBurst)
	}
}
