package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// FreePortsApart finds n free TCP ports on 127.0.0.1 below the ephemeral
// range, gap apart (base, base+gap, ...), reserved for this process, and
// returns the first: `lockd dev --etcd` serves proxy i's etcd API on
// --etcd-port + 100*(i-1). Every block holding one of them is taken whole
// for the process, as reserveBlock takes one, and none becomes the
// current block: no other call hands out their other ports.
func FreePortsApart(n, gap int) (int, error) {
	if n < 1 || gap < 1 {
		return 0, fmt.Errorf("free ports apart: %d ports %d apart", n, gap)
	}
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if err := os.MkdirAll(portDir, 0o777); err != nil {
		return 0, fmt.Errorf("port blocks: %w", err)
	}
	span := (ephemeralLow()-minTestPort)/portBlock*portBlock - (n-1)*gap
	if span < 1 {
		return 0, fmt.Errorf("free ports apart: %d ports %d apart do not fit below the ephemeral range", n, gap)
	}
	for attempt := 0; attempt < blockAttempts; attempt++ {
		base := minTestPort + rand.IntN(span)
		files, ok, err := holdBlocksOf(base, n, gap)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		free := true
		for i := 0; i < n && free; i++ {
			free = bindable(base + i*gap)
		}
		if !free {
			closeAll(files) // bound by something outside the protocol
			continue
		}
		ports.held = append(ports.held, files...)
		return base, nil
	}
	return 0, fmt.Errorf("free ports apart: no %d ports %d apart in %d attempts", n, gap, blockAttempts)
}

// holdBlocksOf flocks every block holding one of the n ports from base,
// gap apart; ok is false (nothing kept) when another process, or this one,
// holds one of them.
func holdBlocksOf(base, n, gap int) (files []*os.File, ok bool, err error) {
	seen := map[int]bool{}
	for i := 0; i < n; i++ {
		b := (base + i*gap - minTestPort) / portBlock
		if seen[b] {
			continue
		}
		seen[b] = true
		f, err := os.OpenFile(filepath.Join(portDir, "block-"+strconv.Itoa(b)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			closeAll(files)
			return nil, false, fmt.Errorf("port blocks: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			closeAll(files)
			return nil, false, nil
		}
		files = append(files, f)
	}
	return files, true, nil
}

// closeAll closes block files, releasing their flocks.
func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
