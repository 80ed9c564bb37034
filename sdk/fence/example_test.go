package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/fake"
)

// A resource guarded by a fence accepts writes only with a token at least
// as high as any it accepted for the lock, so a holder that lost its lock
// (paused, partitioned) cannot overwrite its successor's work. The lock
// here is served by an in-process fake cell (tests/fake).
func Example() {
	cell, err := fake.New(fake.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cell.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{cell.Addr(0)}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const lock = "/demo/locks/ledger"
	f := fence.New(fence.NewRejectionCounter())
	ledger := []string{}
	write := func(token uint64, entry string) error {
		return f.Do(lock, token, func() error { ledger = append(ledger, entry); return nil })
	}

	old := c.NewMutex(lock)
	if err := old.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	stale := old.Token()
	fmt.Println("old holder:", write(stale, "a"))
	// The old holder loses the lock (here it unlocks; in life its session
	// expires while it is paused) and a new holder takes it.
	if err := old.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	next := c.NewMutex(lock)
	if err := next.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(context.Background())
	// The new holder's first act raises the mark.
	fmt.Println("new holder:", write(next.Token(), "b"))
	// The old holder wakes and writes with its stale token: refused.
	err = write(stale, "c")
	fmt.Println("old holder again refused:", errors.Is(err, fence.ErrStaleToken))
	fmt.Println("ledger:", ledger)
	// Output:
	// old holder: <nil>
	// new holder: <nil>
	// old holder again refused: true
	// ledger: [a b]
}
