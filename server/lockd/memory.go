package lockd

import (
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
)

// Memory settings of the Go runtime, from the configuration.
const (
	// DefaultMemoryLimitMB is the soft memory limit when none is
	// configured: twice the spec's state bound (a cell's state under
	// 1 GB, api.MaxBytesPerCell of paths and values), so the collector
	// works harder before the process nears what a replica is sized for,
	// and never stops a state the spec allows from fitting.
	DefaultMemoryLimitMB = 2048
	// DefaultGCPercent is the collector's target: the heap grows by this
	// percent of the live heap between collections. Below the runtime's
	// 100, a big state costs less headroom (its nodes hold few pointers to
	// scan, so collections stay cheap); the memory limit is the backstop.
	DefaultGCPercent = 50
	// maxMemoryLimitMB bounds the setting (1 TiB).
	maxMemoryLimitMB = 1 << 20
	// maxGCPercent bounds the setting; -1 (off: only the limit collects)
	// is allowed too.
	maxGCPercent = 10_000
)

// memorySettings are the runtime's memory limit and GC target.
type memorySettings struct {
	limitBytes int64
	gcPercent  int
}

// memoryFor decides the settings from the config (defaults applied):
// a pure function, tested beside it.
func memoryFor(c Config) (memorySettings, error) {
	if c.MemoryLimitMB < 0 || c.MemoryLimitMB > maxMemoryLimitMB {
		return memorySettings{}, fmt.Errorf("config: memory limit %d MB outside 0 (default) to %d", c.MemoryLimitMB, maxMemoryLimitMB)
	}
	if c.GCPercent < -1 || c.GCPercent > maxGCPercent {
		return memorySettings{}, fmt.Errorf("config: GC percent %d outside -1 (off) to %d", c.GCPercent, maxGCPercent)
	}
	m := memorySettings{limitBytes: int64(c.MemoryLimitMB) << 20, gcPercent: c.GCPercent}
	if m.limitBytes == 0 {
		m.limitBytes = DefaultMemoryLimitMB << 20
	}
	if m.gcPercent == 0 {
		m.gcPercent = DefaultGCPercent
	}
	return m, nil
}

// applyMemory sets the runtime's memory limit and GC target and logs
// them, with what they were before.
func applyMemory(m memorySettings, log *slog.Logger) {
	prevLimit := debug.SetMemoryLimit(m.limitBytes)
	prevGC := debug.SetGCPercent(m.gcPercent)
	before := "none"
	if prevLimit != math.MaxInt64 {
		before = fmt.Sprintf("%d MB", prevLimit>>20)
	}
	log.Info("go memory settings", "memory_limit_mb", m.limitBytes>>20, "gc_percent", m.gcPercent, "memory_limit_before", before, "gc_percent_before", prevGC)
}
