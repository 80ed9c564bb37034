// Command lockd runs one replica of every configured cell (lockd serve), or a
// local five-replica development cluster (lockd dev).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lockd:", err)
		os.Exit(1)
	}
}
