package recent

import (
	"sync"
	"time"
)

// CounterBuckets is how many one-second buckets a Counter keeps: it
// counts over at most the last minute, however many events.
const CounterBuckets = 60

// Counter counts events per second over the last CounterBuckets seconds.
// The zero value is ready.
type Counter struct {
	mu      sync.Mutex
	base    time.Time // the first Add: seconds are counted from it
	sec     [CounterBuckets]int64
	n       [CounterBuckets]int
	started bool
}

// Add counts n events at now.
func (c *Counter) Add(now time.Time, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.base, c.started = now, true
		for i := range c.sec {
			c.sec[i] = -1
		}
	}
	s := max(int64(now.Sub(c.base)/time.Second), 0) // a time before the first Add counts in its second
	i := int(s % CounterBuckets)
	if c.sec[i] != s {
		c.sec[i], c.n[i] = s, 0
	}
	c.n[i] += n
}

// Sum is the events counted in the whole seconds of the span before now
// (a span past CounterBuckets seconds counts CounterBuckets).
func (c *Counter) Sum(now time.Time, span time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return 0
	}
	s := int64(now.Sub(c.base) / time.Second)
	from := s - int64(min(span/time.Second, CounterBuckets)) // buckets after from
	total := 0
	for i := range c.sec {
		if c.sec[i] > from && c.sec[i] <= s {
			total += c.n[i]
		}
	}
	return total
}

// Reset forgets every event counted.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = false
}
