// Package backup keeps exported cell snapshots somewhere that outlives the
// replicas: the disaster-recovery copy lockctl restore rebuilds a cell
// from. Store is what object storage would implement; Dir keeps them in a
// local (or mounted) directory.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Store holds backups: exported dragonboat snapshot directories, one per
// (cell, index).
type Store interface {
	// Put stores the exported snapshot directory snapDir as cell's backup
	// at index and returns where it is. A backup is either all there or
	// not listed.
	Put(ctx context.Context, cell string, index uint64, snapDir string) (location string, err error)
	// List returns the indexes of cell's backups, oldest first.
	List(ctx context.Context, cell string) ([]uint64, error)
	// Fetch makes cell's backup at index available as a local snapshot
	// directory (downloading it under scratch if the store is remote) and
	// returns its path.
	Fetch(ctx context.Context, cell string, index uint64, scratch string) (snapDir string, err error)
}

// ErrNoBackup is returned by Fetch for a backup the store does not hold.
var ErrNoBackup = errors.New("no such backup")

// Dir is a Store in a directory: ROOT/CELL/INDEX (20 digits, so names
// sort by index) holds the snapshot's files.
type Dir struct{ Root string }

func (d Dir) cellDir(cell string) string { return filepath.Join(d.Root, cell) }

func (d Dir) path(cell string, index uint64) string {
	return filepath.Join(d.cellDir(cell), fmt.Sprintf("%020d", index))
}

// Put copies snapDir's files into a temporary directory beside the final
// one, syncs them, and renames it into place.
func (d Dir) Put(ctx context.Context, cell string, index uint64, snapDir string) (string, error) {
	if err := os.MkdirAll(d.cellDir(cell), 0o755); err != nil {
		return "", err
	}
	final := d.path(cell, index)
	if _, err := os.Stat(final); err == nil {
		return final, nil // a snapshot at one index is the same state: keep the first
	}
	tmp, err := os.MkdirTemp(d.cellDir(cell), ".partial-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ents, err := os.ReadDir(snapDir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(snapDir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	return final, syncDir(d.cellDir(cell))
}

// List returns the indexes of cell's complete backups, oldest first.
func (d Dir) List(_ context.Context, cell string) ([]uint64, error) {
	ents, err := os.ReadDir(d.cellDir(cell))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		if i, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Fetch returns the backup's own directory: it is local already.
func (d Dir) Fetch(_ context.Context, cell string, index uint64, _ string) (string, error) {
	p := d.path(cell, index)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: cell %s at index %d in %s", ErrNoBackup, cell, index, d.Root)
	}
	return p, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
