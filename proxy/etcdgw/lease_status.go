package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// What TimeToLive and Leases read of the table, and the keys of a
// lease: its sessions' ephemeral nodes.

// leaseStatus is a lease as TimeToLive answers it.
type leaseStatus struct {
	ttl, granted int64
	sessions     []leaseSession // copies: cell, id, prefixes
}

// status is the caller's lease id as it stands.
func (t *leaseTable) status(w who, id int64) (leaseStatus, error) {
	l, err := t.lookup(w, id)
	if err != nil {
		return leaseStatus{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := leaseStatus{ttl: ttlLeft(l.untilLocked(), t.now()), granted: l.ttl}
	if mutant.On(mutant.EtcdLeaseTTL) {
		st.ttl = l.ttl
	}
	for _, s := range l.sessions {
		st.sessions = append(st.sessions, leaseSession{ref: s.ref, prefixes: append([]string(nil), s.prefixes...)})
	}
	return st, nil
}

// list is the caller's live leases.
func (t *leaseTable) list(w who) []int64 {
	d := digestOf(w)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var ids []int64
	for k, l := range t.leases {
		if k.digest == d && now.Before(l.deadlineLocked()) {
			ids = append(ids, k.id)
		}
	}
	return ids
}

// leaseKeys are the keys of the ephemeral nodes the sessions own: a
// range read (the caller's token) of each prefix the lease wrote on
// each session's cell, filtered by owner, at most MaxLeaseKeysPages
// reads a prefix.
func (g *Gateway) leaseKeys(ctx context.Context, w who, sessions []leaseSession) ([][]byte, error) {
	var keys [][]byte
	for _, s := range sessions {
		for _, prefix := range s.prefixes {
			paths, err := g.ownedPaths(ctx, w, prefix, s.ref.id)
			if err != nil {
				return nil, err
			}
			for _, p := range paths {
				keys = append(keys, g.keys.key(p, g.cfg.DefaultPrefix != ""))
			}
		}
	}
	return keys, nil
}

// ownedPaths are the paths under prefix of ephemeral nodes session owns.
// A caller without read on the whole prefix (a grant on a subtree) has
// the prefix read with the proxy's credentials, and gets only the paths
// its grants let it read.
func (g *Gateway) ownedPaths(ctx context.Context, w who, prefix string, session uint64) ([]string, error) {
	var out []string
	start, end := prefix, prefix+"0" // "0" follows "/": past every path under prefix
	own := false                     // reading with the proxy's credentials, filtering
	for range MaxLeaseKeysPages {
		var resp api.RangeResponse
		req := api.RangeRequest{Root: prefix, Start: start, End: end, KeysOnly: true, SkipContainers: true}
		err := g.leaseRange(ctx, w, own, req, &resp)
		if api.CodeOf(err) == api.CodeForbidden && !own && w.caller != nil {
			own, resp = true, api.RangeResponse{}
			err = g.leaseRange(ctx, w, own, req, &resp)
		}
		if err != nil {
			return nil, err
		}
		for _, n := range resp.Nodes {
			if n.Ephemeral && n.Owner == session && (!own || w.caller.Allows(api.RoleRead, n.Path)) {
				out = append(out, n.Path)
			}
		}
		if !resp.More || len(resp.Nodes) == 0 {
			break
		}
		start = resp.Nodes[len(resp.Nodes)-1].Path + "\x00"
	}
	return out, nil
}

// leaseRange reads a range with the caller's token, or (own) the proxy's.
func (g *Gateway) leaseRange(ctx context.Context, w who, own bool, req api.RangeRequest, resp *api.RangeResponse) error {
	if own {
		return g.be.CallOwn(ctx, api.RouteRange, req, resp)
	}
	return g.be.Call(ctx, w.token, api.RouteRange, req, resp)
}
