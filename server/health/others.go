package health

import (
	"time"

	"github.com/lockservice/lockd/api"
)

// directory judges the directory group: a leader some replica knows.
func (v *view) directory() []api.HealthReason {
	replicas, leader := 0, uint64(0)
	for _, st := range v.status {
		if st.DirectoryReplica {
			replicas++
			leader = max(leader, st.DirectoryLeader)
		}
	}
	if replicas > 0 && leader == 0 {
		return []api.HealthReason{reason(api.HealthCritical, api.ReasonNoLeader, "directory", "none of the %d directory replicas that answered knows a leader: no prefix can be assigned or moved", replicas)}
	}
	return nil
}

// move is a prefix move in flight: its phase, the new cell's staged
// copy, and how long it has been seen.
func (v *view) move(pi api.PrefixInfo) (api.MoveHealth, []api.HealthReason) {
	m := pi.Migration
	mh := api.MoveHealth{Prefix: pi.Prefix, From: m.From, To: m.To, Phase: m.Phase, BeganAt: m.BeganAt, SealNodes: m.SealNodes, StagedNodes: -1}
	for _, rs := range v.replica[m.To] {
		for _, sc := range rs.Staged {
			if sc.Prefix == pi.Prefix && sc.Nodes > mh.StagedNodes {
				mh.StagedNodes = sc.Nodes
			}
		}
	}
	if seen, ok := v.in.MoveSeen[pi.Prefix]; ok {
		mh.AgeMS = max(v.in.Now.Sub(seen), 0).Milliseconds()
	}
	if time.Duration(mh.AgeMS)*time.Millisecond > MoveStuckAfter {
		return mh, []api.HealthReason{reason(api.HealthDegraded, api.ReasonMoveStuck, "prefix "+pi.Prefix,
			"its move from %s to %s has been %s for %v: resume it with lockctl migrate %s --to %s", m.From, m.To, m.Phase, (time.Duration(mh.AgeMS) * time.Millisecond).Round(time.Second), pi.Prefix, m.To)}
	}
	return mh, nil
}

// lockd is one lockd as it answered, and when it last did.
func (v *view) lockd(l api.LockdStatus) (api.LockdHealth, []api.HealthReason) {
	lh := api.LockdHealth{ID: l.ID, APIAddr: l.APIAddr, Zone: l.Zone, Error: l.Error, LastAnsweredMS: -1}
	if at, ok := v.in.LastAnswered[l.ID]; ok {
		lh.LastAnsweredMS = max(v.in.Now.Sub(at), 0).Milliseconds()
	}
	if st := l.Status; st != nil {
		lh.Version, lh.Replicas, lh.FsyncP99MS = st.Version, len(st.Cells), st.FsyncP99MS
		if st.DirectoryReplica {
			lh.Directory = "replica"
			if st.DirectoryLeader == l.ID {
				lh.Directory = "leader"
			}
		}
		return lh, nil
	}
	since := "never since this lockd started"
	if lh.LastAnsweredMS >= 0 {
		since = "last answered " + (time.Duration(lh.LastAnsweredMS) * time.Millisecond).Round(time.Second).String() + " ago"
	}
	return lh, []api.HealthReason{reason(api.HealthDegraded, api.ReasonLockdDown, "lockd "+sprintf("%d", l.ID), "%s does not answer (%s): %s", l.APIAddr, since, l.Error)}
}

// proxyReasons judges a lockproxy: it answers, and its batches to each
// cell are confirmed.
func (v *view) proxyReasons(p api.ProxyHealth) []api.HealthReason {
	subject := "proxy " + p.APIAddr
	if p.Error != "" {
		return []api.HealthReason{reason(api.HealthDegraded, api.ReasonProxyDown, subject, "does not answer: %s (its clients' sessions expire unless they fail over)", p.Error)}
	}
	var out []api.HealthReason
	for _, c := range p.Cells {
		switch {
		case c.Sessions == 0:
		case c.LastBatchAgeMS < 0: // none confirmed yet: a batch goes every second
			if since, ok := v.in.UnconfirmedSince[ProxyCellKey(p.APIAddr, c.Cell)]; ok && v.in.Now.Sub(since) > ProxyBatchLate {
				out = append(out, reason(api.HealthDegraded, api.ReasonProxyBehind, subject, "no KeepAlive batch to cell %s confirmed in %.0f s (%d sessions)", c.Cell, v.in.Now.Sub(since).Seconds(), c.Sessions))
			}
		case time.Duration(c.LastBatchAgeMS)*time.Millisecond > ProxyBatchLate:
			out = append(out, reason(api.HealthDegraded, api.ReasonProxyBehind, subject, "its last KeepAlive batch to cell %s was confirmed %.1f s ago (%d sessions)", c.Cell, float64(c.LastBatchAgeMS)/1000, c.Sessions))
		}
	}
	return out
}

// tenant is a tenant's usage on each cell (as the cell's leader has it)
// against its quota.
func (v *view) tenant(t api.Tenant) (api.TenantHealth, []api.HealthReason) {
	q := t.Quota.Effective()
	th := api.TenantHealth{Name: t.Name, Quota: q, Cells: []api.TenantCellUsage{}}
	var out []api.HealthReason
	for _, ci := range v.in.Dir.Cells {
		leader, _ := v.leaderOf(ci.Name)
		if leader == nil {
			continue
		}
		for _, u := range leader.Usage {
			if u.Tenant != t.Name {
				continue
			}
			th.Cells = append(th.Cells, api.TenantCellUsage{Cell: ci.Name, Sessions: u.Sessions, Nodes: u.Nodes, Bytes: u.Bytes})
			if what, used, of := nearQuota(u, q); what != "" {
				out = append(out, reason(api.HealthDegraded, api.ReasonTenantQuota, "tenant "+t.Name, "%s on cell %s: %d of %d (%.0f%%); past it its requests get quota_exceeded", what, ci.Name, used, of, 100*float64(used)/float64(of)))
			}
		}
	}
	return th, out
}

// nearQuota names the first of a usage's figures at QuotaWarnShare of
// its quota or more.
func nearQuota(u api.TenantUsage, q api.Quota) (string, int64, int64) {
	for _, f := range []struct {
		what     string
		used, of int64
	}{{"sessions", int64(u.Sessions), int64(q.Sessions)}, {"nodes", int64(u.Nodes), int64(q.Nodes)}, {"bytes", u.Bytes, q.Bytes}} {
		if f.of > 0 && float64(f.used) >= QuotaWarnShare*float64(f.of) {
			return f.what, f.used, f.of
		}
	}
	return "", 0, 0
}
