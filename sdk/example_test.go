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
