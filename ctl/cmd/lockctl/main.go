// Command lockctl is the command-line client of the lockd lock service.
// See package github.com/lockservice/lockd/ctl for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockservice/lockd/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
