//go:build !windows

// Command pausedleader runs the spec's paused-leader scenario against a
// lockd cluster: a worker holds a lock and writes to a fenced resource; it
// is paused (SIGSTOP) past its lease; another worker takes over, fences
// first and writes; the first resumes and its late write is refused with
// HTTP 409. See README.md.
//
//	go run ./sdk/examples/pausedleader --endpoints 127.0.0.1:7001,127.0.0.1:7002
//
// Without a subcommand it is the coordinator: it serves the protected
// resource on loopback (fence.Middleware in front of a handler), starts two
// copies of itself in worker mode, pauses and resumes the first by PID, and
// exits 0 only if the story happened as it should. "pausedleader worker"
// is one worker: it holds the lock, fences, and keeps writing with its
// token (see worker.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// devEndpoints is the local development cluster (make run).
const devEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"

// options are the flags shared by the coordinator and its workers.
type options struct {
	endpoints string
	lock      string
	lease     time.Duration
	work      time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.endpoints, "endpoints", devEndpoints, "comma-separated lockd API addresses")
	fs.StringVar(&o.lock, "lock", "/demo/examples/pausedleader", "path of the lock the workers take")
	fs.DurationVar(&o.lease, "lease", 3*time.Second, "session lease of the workers (the spec's is 12s)")
	fs.DurationVar(&o.work, "work", 300*time.Millisecond, "how long a worker works on a write it has prepared before sending it")
}

func (o *options) endpointList() []string {
	var out []string
	for _, e := range strings.Split(o.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(ctx, os.Args[2:]))
	}
	os.Exit(coordinatorMain(ctx, os.Args[1:]))
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "pausedleader: "+format+"\n", args...)
	return 1
}
