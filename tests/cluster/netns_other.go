//go:build !linux

package cluster

import "errors"

// NetnsPrefix begins the name of every namespace and link Netns creates.
const NetnsPrefix = "lcx"

var errNoNetns = errors.New("network namespaces need Linux")

// Netns is Linux only; elsewhere NewNetns fails and the chaos suite runs
// without partitions.
type Netns struct{}

// NetnsAvailable reports why Netns cannot be used here.
func NetnsAvailable() error { return errNoNetns }

// NewNetns fails outside Linux.
func NewNetns(int, func(string, ...any)) (*Netns, error) { return nil, errNoNetns }

// SweepNetns does nothing outside Linux.
func SweepNetns(func(string, ...any)) {}

func (*Netns) Host(int) string { return "" }
func (*Netns) Command(_ int, bin string, args []string) (string, []string) {
	return bin, args
}
func (*Netns) Namespace(int) string     { return "" }
func (*Netns) Bridge() string           { return "" }
func (*Netns) Cut(int, int) error       { return errNoNetns }
func (*Netns) Partition(...[]int) error { return errNoNetns }
func (*Netns) Isolate(int) error        { return errNoNetns }
func (*Netns) Cuts() [][2]int           { return nil }
func (*Netns) Heal() error              { return nil }
func (*Netns) Close() error             { return nil }
