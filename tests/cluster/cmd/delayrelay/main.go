// Command delayrelay relays TCP connections from --listen to --to,
// delaying every chunk by --min to --max in each direction (package
// relay). The test harness runs one in front of each replica's Raft port,
// inside the replica's network namespace, for a cell whose replicas are
// far apart.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockservice/lockd/tests/cluster/relay"
)

func main() {
	listen := flag.String("listen", "", "address to accept on")
	to := flag.String("to", "", "address to relay to")
	minD := flag.Duration("min", 50*time.Millisecond, "least delay of a chunk, each direction")
	maxD := flag.Duration("max", 100*time.Millisecond, "most delay of a chunk, each direction")
	flag.Parse()
	r, err := relay.Listen(*listen, *to, *minD, *maxD)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delayrelay:", err)
		os.Exit(1)
	}
	fmt.Printf("delayrelay: %s -> %s, %v to %v each way\n", r.Addr(), *to, *minD, *maxD)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = r.Close()
}
