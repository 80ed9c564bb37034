// Package directory is the routing view of the cell directory: which cell
// serves each top-level prefix (and under which directory epoch), which
// lockds host each cell's replicas. Directory is the immutable map that
// lockd, the proxy, the SDK and lockctl route by, built from what the
// directory group serves (api.DirectoryResponse) and re-read only on
// wrong_cell, moved or an unknown prefix. The group's replicated state
// machine, which that response comes from, is server/dirfsm.
package directory

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// ShardID is the directory group's Raft shard. Cells get shard ids below
// it; it is never a cell's.
const ShardID uint64 = 1 << 40

// Directory is an immutable view of the directory.
type Directory struct {
	raw      api.DirectoryResponse
	byPrefix map[string]api.PrefixInfo
	byName   map[string]api.CellInfo
	byToken  map[string]api.Tenant // token digest → tenant
}

// New validates a served directory and builds the view. Every prefix is a
// top-level path served by a known cell; names and shard ids are unique.
func New(resp api.DirectoryResponse) (*Directory, error) {
	d := &Directory{raw: resp, byPrefix: map[string]api.PrefixInfo{}, byName: map[string]api.CellInfo{}, byToken: map[string]api.Tenant{}}
	for _, t := range resp.Tenants {
		for _, digest := range t.Tokens {
			d.byToken[digest] = t
		}
	}
	shards := map[uint64]string{}
	for i, c := range resp.Cells {
		if c.Name == "" {
			return nil, fmt.Errorf("directory: cell %d has no name", i)
		}
		if _, dup := d.byName[c.Name]; dup {
			return nil, fmt.Errorf("directory: cell %q listed twice", c.Name)
		}
		if c.ShardID == 0 || c.ShardID == ShardID {
			return nil, fmt.Errorf("directory: cell %q has shard id %d", c.Name, c.ShardID)
		}
		if other, dup := shards[c.ShardID]; dup {
			return nil, fmt.Errorf("directory: cells %q and %q share shard id %d", other, c.Name, c.ShardID)
		}
		shards[c.ShardID] = c.Name
		d.byName[c.Name] = c
	}
	for _, p := range resp.Prefixes {
		if err := api.ValidatePath(p.Prefix); err != nil || api.Parent(p.Prefix) != "/" {
			return nil, fmt.Errorf("directory: prefix %q is not a top-level path", p.Prefix)
		}
		if _, dup := d.byPrefix[p.Prefix]; dup {
			return nil, fmt.Errorf("directory: prefix %s listed twice", p.Prefix)
		}
		if _, ok := d.byName[p.Cell]; !ok {
			return nil, fmt.Errorf("directory: prefix %s served by unknown cell %q", p.Prefix, p.Cell)
		}
		if p.Epoch == 0 || p.Epoch > api.MaxTokenEpoch {
			return nil, fmt.Errorf("directory: prefix %s has epoch %d outside [1, %d]", p.Prefix, p.Epoch, uint64(api.MaxTokenEpoch))
		}
		d.byPrefix[p.Prefix] = p
	}
	return d, nil
}

// Response is the directory as served.
func (d *Directory) Response() api.DirectoryResponse { return d.raw }

// TenantByToken returns the tenant an API token belongs to.
func (d *Directory) TenantByToken(token string) (api.Tenant, bool) {
	t, ok := d.byToken[api.TokenDigest(token)]
	return t, ok
}

// Tenant returns a tenant by name.
func (d *Directory) Tenant(name string) (api.Tenant, bool) {
	for _, t := range d.raw.Tenants {
		if t.Name == name {
			return t, true
		}
	}
	return api.Tenant{}, false
}

// LogCodec is the cluster's log codec floor (api.DirectoryResponse).
func (d *Directory) LogCodec() uint8 { return d.raw.LogCodec }

// Index is the directory group's index the view was read at.
func (d *Directory) Index() uint64 { return d.raw.Index }

// CellFor returns the cell serving a valid path, or wrong_cell.
func (d *Directory) CellFor(path string) (api.CellInfo, error) {
	p, err := d.PrefixFor(path)
	if err != nil {
		return api.CellInfo{}, err
	}
	return d.byName[p.Cell], nil
}

// PrefixFor returns the directory entry of a path's prefix, or wrong_cell.
func (d *Directory) PrefixFor(path string) (api.PrefixInfo, error) {
	p, ok := d.byPrefix[api.Prefix(path)]
	if !ok {
		return api.PrefixInfo{}, api.Errorf(api.CodeWrongCell, "no cell serves prefix %s", api.Prefix(path))
	}
	return p, nil
}

// Cell returns a cell by name.
func (d *Directory) Cell(name string) (api.CellInfo, bool) {
	c, ok := d.byName[name]
	return c, ok
}

// Cells returns every cell, sorted by name.
func (d *Directory) Cells() []api.CellInfo {
	out := make([]api.CellInfo, 0, len(d.byName))
	for _, c := range d.byName {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Prefixes returns every prefix entry, sorted.
func (d *Directory) Prefixes() []api.PrefixInfo {
	out := make([]api.PrefixInfo, 0, len(d.byPrefix))
	for _, p := range d.byPrefix {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out
}

// Lockd returns a lockd by id.
func (d *Directory) Lockd(id uint64) (api.LockdInfo, bool) {
	for _, l := range d.raw.Lockds {
		if l.ID == id {
			return l, true
		}
	}
	return api.LockdInfo{}, false
}

// RestorePlan is the plan lockd restore imports a cell's backup by: its
// restored replicas with their Raft addresses, its prefixes (all it is to
// serve) with their epochs, and the leader epoch it starts at.
// An error if the directory has no restore plan for the cell.
func (d *Directory) RestorePlan(cell string) (api.RestorePlan, error) {
	c, ok := d.byName[cell]
	if !ok {
		return api.RestorePlan{}, api.Errorf(api.CodeNotFound, "the directory has no cell %q", cell)
	}
	plan := api.RestorePlan{Cell: c.Name, ShardID: c.ShardID, BackupIndex: c.RestoreIndex, Epochs: map[string]uint64{}, Timing: c.Timing,
		LeaderEpochFloor: c.Restores * api.LeaderEpochsPerRestore}
	for _, r := range c.Replicas {
		if !r.Restored {
			continue
		}
		l, ok := d.Lockd(r.Lockd)
		if !ok {
			return api.RestorePlan{}, api.Errorf(api.CodeNotFound, "cell %s has a replica on lockd %d, which the directory does not list", cell, r.Lockd)
		}
		plan.Replicas = append(plan.Replicas, api.RestoreReplica{ReplicaID: r.ReplicaID, Lockd: r.Lockd, RaftAddr: l.RaftAddr, APIAddr: l.APIAddr})
	}
	if c.RestoreIndex == 0 || len(plan.Replicas) != len(c.Replicas) {
		return api.RestorePlan{}, api.Errorf(api.CodeConflict, "cell %s has no restore plan in the directory (plan one with lockctl restore %s --index N)", cell, cell)
	}
	for _, p := range d.byPrefix {
		if p.Cell == cell {
			plan.Epochs[p.Prefix] = p.Epoch
		}
	}
	return plan, nil
}
