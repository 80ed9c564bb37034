package audit

// The audit file: appended to, and rotated by size. Before a write would
// take PATH past MaxBytes, PATH.(Keep-1) becomes PATH.Keep (the oldest
// is dropped), …, PATH becomes PATH.1, and a new PATH is started. Disk
// use is bounded by (Keep+1) × MaxBytes (a single record larger than
// MaxBytes still gets a file of its own).

import (
	"fmt"
	"os"
	"path/filepath"
)

// Bounds of the file's rotation.
const (
	// DefaultMaxBytes is a file's size before rotation, unless set.
	DefaultMaxBytes = 100 << 20
	// MaxMaxBytes bounds Options.MaxBytes.
	MaxMaxBytes = 1 << 40
	// DefaultKeep is how many rotated files are kept, unless set.
	DefaultKeep = 5
	// MaxKeep bounds Options.Keep (each rotation renames every kept file).
	MaxKeep = 100
)

// CheckOptions refuses options outside the bounds, naming the flag.
func CheckOptions(o Options) error {
	switch {
	case o.MaxBytes < 0 || o.MaxBytes > MaxMaxBytes:
		return fmt.Errorf("--audit-max-mb %d is outside 1 to %d (0: %d)", o.MaxBytes>>20, MaxMaxBytes>>20, DefaultMaxBytes>>20)
	case o.Keep < 0 || o.Keep > MaxKeep:
		return fmt.Errorf("--audit-keep %d is outside 0 to %d", o.Keep, MaxKeep)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Keep == 0 {
		o.Keep = DefaultKeep
	}
	return o
}

// rotator is the open audit file; its caller serialises it.
type rotator struct {
	o    Options
	f    *os.File // nil once closed, or after a failed rotation (reopened on the next write)
	size int64
	// closed: Close was called; later writes are dropped.
	closed bool
}

func openRotator(o Options) (*rotator, error) {
	if err := CheckOptions(o); err != nil {
		return nil, err
	}
	r := &rotator{o: o.withDefaults()}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotator) open() error {
	if err := os.MkdirAll(filepath.Dir(r.o.Path), 0o755); err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	f, err := os.OpenFile(r.o.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit file: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// needsRotation decides whether a write of add bytes rotates first: it
// would pass max, and the file holds something.
func needsRotation(size, add, max int64) bool {
	return size > 0 && size+add > max
}

// rotatedName is PATH.i.
func rotatedName(path string, i int) string { return fmt.Sprintf("%s.%d", path, i) }

// write appends b, rotating first if needed. After close it drops b; a
// file left closed by a failed rotation is opened again first.
func (r *rotator) write(b []byte) error {
	if r.closed {
		return nil
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			return err
		}
	}
	if needsRotation(r.size, int64(len(b)), r.o.MaxBytes) {
		if err := r.rotate(); err != nil {
			return err
		}
	}
	n, err := r.f.Write(b)
	r.size += int64(n)
	return err
}

// rotate shifts the kept files by one and starts PATH afresh.
func (r *rotator) rotate() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	r.f = nil
	_ = os.Remove(rotatedName(r.o.Path, r.o.Keep))
	for i := r.o.Keep - 1; i >= 1; i-- {
		if err := os.Rename(rotatedName(r.o.Path, i), rotatedName(r.o.Path, i+1)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("audit file rotation: %w", err)
		}
	}
	if err := os.Rename(r.o.Path, rotatedName(r.o.Path, 1)); err != nil {
		return fmt.Errorf("audit file rotation: %w", err)
	}
	return r.open()
}

func (r *rotator) close() error {
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
