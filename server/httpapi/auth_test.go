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
		if l.allow("a", 5, now) {
			passed++
		}
	}
	if passed != 5 {
		t.Fatalf("a burst of 10 at 5/s: %d passed, want 5", passed)
	}
	if !l.allow("b", 5, now) {
		t.Fatal("another tenant is held to a's bucket")
	}
	if l.allow("a", 5, now.Add(100*time.Millisecond)) {
		t.Fatal("a write passed 0.1 s after the bucket emptied at 5/s")
	}
	if !l.allow("a", 5, now.Add(300*time.Millisecond)) {
		t.Fatal("no write passed 0.3 s after the bucket emptied at 5/s")
	}
}
