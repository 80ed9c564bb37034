package dirfsm

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/lockservice/lockd/api"
)

// snapshot is the state as written to a snapshot: slices in a fixed order,
// so equal states give equal bytes.
type snapshot struct {
	Index     uint64            `json:"index"`
	Lockds    []api.LockdInfo   `json:"lockds"`
	Cells     []*cellRec        `json:"cells"`
	Prefixes  []*api.PrefixInfo `json:"prefixes"`
	DirLockds []uint64          `json:"dir_lockds"`
	NextShard uint64            `json:"next_shard"`
	Proxies   []api.ProxyInfo   `json:"proxies,omitempty"`
	Tenants   []api.Tenant      `json:"tenants,omitempty"`
	// LogCodec is the log codec floor (absent before it: 0).
	LogCodec uint8 `json:"log_codec,omitempty"`
}

// Save writes the state.
func (s *State) Save(w io.Writer) error {
	snap := snapshot{Index: s.index, Lockds: s.lockdList(), DirLockds: s.dirLockds, NextShard: s.nextShard, Proxies: s.proxyList(), Tenants: s.tenantList(), LogCodec: s.codecFloor}
	for _, c := range s.cells {
		snap.Cells = append(snap.Cells, c)
	}
	sort.Slice(snap.Cells, func(i, j int) bool { return snap.Cells[i].Name < snap.Cells[j].Name })
	for _, p := range s.prefixes {
		snap.Prefixes = append(snap.Prefixes, p)
	}
	sort.Slice(snap.Prefixes, func(i, j int) bool { return snap.Prefixes[i].Prefix < snap.Prefixes[j].Prefix })
	return json.NewEncoder(w).Encode(&snap)
}

// Load replaces the state with a saved one.
func (s *State) Load(r io.Reader) error {
	var snap snapshot
	if err := json.NewDecoder(r).Decode(&snap); err != nil {
		return fmt.Errorf("directory snapshot: %w", err)
	}
	next := NewState()
	next.index, next.dirLockds, next.nextShard = snap.Index, snap.DirLockds, snap.NextShard
	next.codecFloor = snap.LogCodec
	for _, l := range snap.Lockds {
		next.lockds[l.ID] = l
	}
	for _, p := range snap.Proxies {
		next.proxies[p.Name] = p
	}
	for _, t := range snap.Tenants {
		next.tenants[t.Name] = t
	}
	for _, c := range snap.Cells {
		next.cells[c.Name] = c
	}
	for _, p := range snap.Prefixes {
		next.prefixes[p.Prefix] = p
	}
	*s = *next
	return nil
}
