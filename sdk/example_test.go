package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"path"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/fake"
)

// These examples run against an in-process fake of a lockd cell
// (tests/fake, a unit-test double serving the prefix /demo); against a
// real deployment, pass its API addresses as Endpoints.
func demoCluster() (endpoints []string, stop func()) {
	cell, err := fake.New(fake.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return []string{cell.Addr(0)}, cell.Close
}

// Connect, write a config value, and read it back.
func ExampleNew() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Put(ctx, "/demo/config/mode", []byte("active"), sdk.MakeParents()); err != nil {
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
	// Output: active (version 1)
}

// Update a value only if nobody changed it since it was read. A write
// whose reply was lost may have been applied: it fails with
// ErrOutcomeUnknown, and the caller re-reads rather than assumes.
func ExampleClient_CompareAndSet() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// A write answers with the node's metadata (version, indices), not
	// its value.
	n, err := c.CompareAndSet(ctx, "/demo/counter", []byte("1"), 0) // 0: must not exist yet
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("created %s at version %d\n", "1", n.Version)
	for _, next := range []string{"2", "3"} {
		n, err = c.CompareAndSet(ctx, "/demo/counter", []byte(next), 1) // expects version 1
		switch {
		case errors.Is(err, sdk.ErrVersionMismatch):
			fmt.Println("lost the race: re-read and retry")
		case errors.Is(err, sdk.ErrOutcomeUnknown):
			fmt.Println("may have been applied: re-read")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("set %s at version %d\n", next, n.Version)
		}
	}
	// Output:
	// created 1 at version 1
	// set 2 at version 2
	// lost the race: re-read and retry
}

// Follow a node's value: read it and arm a watch in one call, wait for the
// one event, then re-read and re-arm.
func ExampleClient_GetW() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for i := range 3 {
		n, exists, ch, err := c.GetW(ctx, "/demo/mode")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("exists: %v value: %q\n", exists, n.Value)
		if i == 2 {
			break
		}
		// Someone writes it (here: we do).
		if _, err := c.Put(ctx, "/demo/mode", fmt.Appendf(nil, "v%d", i+1)); err != nil {
			log.Fatal(err)
		}
		ev := <-ch // exactly one event, then the channel closes
		if ev.Type == sdk.EventSessionExpired || ev.Type == sdk.EventSessionClosed {
			return // the watch is void: start over with a new read
		}
		fmt.Println("event:", ev.Type, ev.Path)
	}
	// Output:
	// exists: false value: ""
	// event: created /demo/mode
	// exists: true value: "v1"
	// event: data_changed /demo/mode
	// exists: true value: "v2"
}

// Take a lock, fence the protected resource with the grant's token before
// reading any state, and stop the moment the lock is in doubt.
func ExampleMutex() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.NewMutex("/demo/locks/ledger-7")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	work := m.Context() // cancelled on jeopardy, loss or Unlock
	first := m.Token()
	// First act: a fenced write that raises the resource's mark (see
	// package sdk/fence), then read state and work, sending the token
	// with every write, for as long as work is not done.
	fmt.Println("holding", path.Base(m.Node()), "token > 0:", first > 0)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	<-work.Done()
	fmt.Println("released; context:", work.Err())

	// The next holder's token is higher: the resource refuses the old one.
	next := c.NewMutex("/demo/locks/ledger-7")
	if err := next.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(context.Background())
	fmt.Println("holding", path.Base(next.Node()), "token higher:", next.Token() > first)
	// Output:
	// holding w-0000000000 token > 0: true
	// released; context: context canceled
	// holding w-0000000001 token higher: true
}

// TryLock gives up after a timeout, leaving no node behind.
func ExampleMutex_TryLock() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	holder := c.NewMutex("/demo/locks/report")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	m := c.NewMutex("/demo/locks/report")
	if err := m.TryLock(ctx, 100*time.Millisecond); errors.Is(err, sdk.ErrLockTimeout) {
		fmt.Println("busy; try later")
	} else if err != nil {
		log.Fatal(err)
	}
	if err := holder.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := m.TryLock(ctx, time.Second); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())
	fmt.Println("acquired:", m.Held())
	// Output:
	// busy; try later
	// acquired: true
}

// Campaign for leadership, act as leader only under Context, and learn
// who leads.
func ExampleElection() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e := c.NewElection("/demo/elections/scheduler")
	if err := e.Campaign(ctx, []byte("10.0.0.7:8080")); err != nil {
		log.Fatal(err)
	}
	lead := e.Context() // done on jeopardy, loss or Resign: not leader from then on
	l, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader: %s (our token: %v)\n", l.Value, l.Token == e.Token())
	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	<-lead.Done()
	if _, err := e.Leader(ctx); errors.Is(err, sdk.ErrNoLeader) {
		fmt.Println("no leader after resigning")
	}
	// Output:
	// leader: 10.0.0.7:8080 (our token: true)
	// no leader after resigning
}

// Join a group and list its members.
func ExampleClient_Join() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	a, err := c.Join(ctx, "/demo/groups/workers", []byte("10.0.0.7:9000"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Join(ctx, "/demo/groups/workers", []byte("10.0.0.8:9000")); err != nil {
		log.Fatal(err)
	}
	show := func() {
		members, err := c.Members(ctx, "/demo/groups/workers")
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range members { // in join order
			fmt.Println(m.Node, string(m.Value))
		}
	}
	show()
	if err := a.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a leaves:")
	show()
	// Output:
	// /demo/groups/workers/m-0000000000 10.0.0.7:9000
	// /demo/groups/workers/m-0000000001 10.0.0.8:9000
	// after a leaves:
	// /demo/groups/workers/m-0000000001 10.0.0.8:9000
}

// A session ends when the client closes (or the cell expires it); its
// ephemeral nodes, locks and watches end with it.
func ExampleSession_Err() {
	endpoints, stop := demoCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints})
	if err != nil {
		log.Fatal(err)
	}
	cell, err := c.CellFor("/demo")
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.Session(ctx, cell)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("live:", s.Err() == nil)
	_ = c.Close()
	fmt.Println("ended:", s.Err())
	// Output:
	// live: true
	// ended: sdk: client closed
}
