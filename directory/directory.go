// Package directory maps each top-level prefix of the namespace to the cell
// that serves it. Until the directory group exists the map is static
// configuration, identical on every lockd, proxy and client.
package directory

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// Directory is an immutable prefix → cell map.
type Directory struct {
	cells    []api.CellInfo
	byPrefix map[string]int
	byName   map[string]int
}

// New validates cells and builds a directory. Every prefix must be a
// top-level path served by exactly one cell; names and shard ids are unique.
func New(cells []api.CellInfo) (*Directory, error) {
	d := &Directory{byPrefix: map[string]int{}, byName: map[string]int{}}
	shards := map[uint64]string{}
	for i, c := range cells {
		if c.Name == "" {
			return nil, fmt.Errorf("directory: cell %d has no name", i)
		}
		if _, dup := d.byName[c.Name]; dup {
			return nil, fmt.Errorf("directory: cell %q listed twice", c.Name)
		}
		if c.ShardID == 0 {
			return nil, fmt.Errorf("directory: cell %q has shard id 0", c.Name)
		}
		if other, dup := shards[c.ShardID]; dup {
			return nil, fmt.Errorf("directory: cells %q and %q share shard id %d", other, c.Name, c.ShardID)
		}
		shards[c.ShardID] = c.Name
		if c.Epoch == 0 {
			c.Epoch = 1
		}
		if c.Epoch > api.MaxTokenEpoch {
			return nil, fmt.Errorf("directory: cell %q epoch %d over %d", c.Name, c.Epoch, uint64(api.MaxTokenEpoch))
		}
		if len(c.Prefixes) == 0 {
			return nil, fmt.Errorf("directory: cell %q serves no prefix", c.Name)
		}
		for _, p := range c.Prefixes {
			if err := api.ValidatePath(p); err != nil || api.Parent(p) != "/" {
				return nil, fmt.Errorf("directory: cell %q prefix %q is not a top-level path", c.Name, p)
			}
			if j, dup := d.byPrefix[p]; dup {
				return nil, fmt.Errorf("directory: prefix %s served by %q and %q", p, d.cells[j].Name, c.Name)
			}
			d.byPrefix[p] = len(d.cells)
		}
		c.Prefixes = append([]string(nil), c.Prefixes...)
		c.Endpoints = append([]string(nil), c.Endpoints...)
		d.byName[c.Name] = len(d.cells)
		d.cells = append(d.cells, c)
	}
	return d, nil
}

// CellFor returns the cell serving a valid path, or wrong_cell.
func (d *Directory) CellFor(path string) (api.CellInfo, error) {
	i, ok := d.byPrefix[api.Prefix(path)]
	if !ok {
		return api.CellInfo{}, api.Errorf(api.CodeWrongCell, "no cell serves prefix %s", api.Prefix(path))
	}
	return d.cells[i], nil
}

// Cell returns a cell by name.
func (d *Directory) Cell(name string) (api.CellInfo, bool) {
	i, ok := d.byName[name]
	if !ok {
		return api.CellInfo{}, false
	}
	return d.cells[i], true
}

// Cells returns every cell, sorted by name.
func (d *Directory) Cells() []api.CellInfo {
	out := append([]api.CellInfo(nil), d.cells...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
