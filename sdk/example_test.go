package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockservice/lockd/sdk"
)

// Connect, write a config value, and read it back. (Needs a running
// cluster, so it has no Output and is compiled but not run.)
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001", "127.0.0.1:7002"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Put(ctx, "/demo/config/mode", []byte("active")); err != nil {
		log.Fatal(err)
	}
	n, err := c.Get(ctx, "/demo/config/mode")
	switch {
	case errors.Is(err, sdk.ErrNoNode):
		fmt.Println("not set")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s (version %d)\n", n.Value, n.Version)
	}
}

// Follow a node's value: read it and arm a watch in one call, wait for the
// one event, then re-read and re-arm.
func ExampleClient_GetW() {
	ctx := context.Background()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for range 3 {
		n, exists, ch, err := c.GetW(ctx, "/demo/config/mode")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("exists:", exists, "value:", string(n.Value))
		ev := <-ch // exactly one event, then the channel closes
		if ev.Type == sdk.EventSessionExpired || ev.Type == sdk.EventSessionClosed {
			return
		}
	}
}

// Watch a session's health.
func ExampleSession_Events() {
	ctx := context.Background()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cell, err := c.CellFor("/demo")
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.Session(ctx, cell)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range s.Events() {
		fmt.Println(ev.Type, ev.Epoch)
	}
	fmt.Println("session ended:", s.Err())
}

// Take a lock, fence the protected resource with the grant's token before
// reading any state, and stop the moment the lock is in doubt.
func ExampleMutex() {
	ctx := context.Background()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.NewMutex("/demo/locks/ledger-7")
	if err := m.TryLock(ctx, 30*time.Second); errors.Is(err, sdk.ErrLockTimeout) {
		fmt.Println("busy; try later")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())

	work := m.Context() // cancelled on jeopardy, loss or Unlock
	token := m.Token()
	// First act: a fenced write that raises the resource's mark (see
	// package sdk/fence), then read state and work, sending token with
	// every write.
	fmt.Println("holding", m.Node(), "with token", token)
	select {
	case <-work.Done():
		fmt.Println("lock in doubt or lost: stop writing")
	case <-time.After(10 * time.Second):
		fmt.Println("done")
	}
}

// Campaign for leadership, act as leader only under Context, and
// campaign again when leadership is in doubt (after jeopardy Campaign
// returns once it is certain again, or wins it anew).
func ExampleElection() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e := c.NewElection("/demo/elections/scheduler")
	go func() {
		for l := range e.Observe(ctx) { // current leader, then every change
			fmt.Printf("leader: %q (token %d)\n", l.Value, l.Token)
		}
	}()
	for ctx.Err() == nil {
		if err := e.Campaign(ctx, []byte("10.0.0.7:8080")); err != nil {
			break
		}
		lead := e.Context()
		fmt.Println("leading with token", e.Token())
		<-lead.Done() // jeopardy, loss, or ctx: not leader from here on
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := e.Resign(rctx); err != nil && !errors.Is(err, sdk.ErrNotHeld) {
		log.Print(err)
	}
}

// Join a group and follow its membership.
func ExampleClient_Join() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{"127.0.0.1:7001"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	me, err := c.Join(ctx, "/demo/groups/workers", []byte("10.0.0.7:9000"))
	if err != nil {
		log.Fatal(err)
	}
	defer me.Leave(context.Background())
	for members := range c.WatchMembers(ctx, "/demo/groups/workers") {
		for _, m := range members { // in join order
			fmt.Println(m.Node, string(m.Value))
		}
	}
}
