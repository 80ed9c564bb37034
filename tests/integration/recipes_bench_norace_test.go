//go:build !race

package integration_test

// benchWaiters is the queue behind one lock in BenchmarkRecipeHandoff: the
// spec's 2 000 (the race detector's goroutine limit needs fewer under -race).
const benchWaiters = 2000
