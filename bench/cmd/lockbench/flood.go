package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// flood: one tenant floods the cell with writes while another takes and
// releases a lock; the quiet tenant's Lock+Unlock latency alone and during
// the flood is the figure (the noisy one's quota must refuse its excess
// with 429 quota_exceeded instead of slowing the cell for everyone). The
// cluster must require tokens (--start --auth, or --admin-token): the
// scenario makes the two tenants as the admin. quota is the noisy
// tenant's writes per second (0: the default).
func flood(ctx context.Context, e *env, writers, quota int) ([]report.Result, error) {
	if e.adminToken == "" {
		return nil, errors.New("flood needs a cluster that requires tokens: --start --auth, or --admin-token")
	}
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: e.endpoints, AuthToken: e.adminToken, Direct: true})
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	base := "/demo/lockbench/" + e.run
	quietName, noisyName := "quiet-"+e.run, "noisy-"+e.run
	tokens, err := floodTenants(ctx, adm, base, quietName, noisyName, quota)
	if err != nil {
		return nil, err
	}
	defer func() {
		for name := range tokens {
			_, _ = adm.DeleteTenant(context.WithoutCancel(ctx), name)
		}
	}()
	fb, err := newFloodBench(ctx, e, base, tokens[quietName], tokens[noisyName])
	if err != nil {
		return nil, err
	}
	defer fb.close()
	if _, err := fb.quiet.Session(ctx, "demo"); err != nil {
		return nil, err
	}
	params := map[string]string{"op": "Lock+Unlock", "workers": "1", "noisy_writers": strconv.Itoa(writers), "noisy_quota_per_s": strconv.Itoa(api.Quota{WritesPerSec: quota}.Effective().WritesPerSec)}
	alone := fb.quietLoop(ctx, "flood: quiet alone")
	out := []report.Result{{Scenario: "flood", Case: "quiet tenant, alone", Params: params, Summary: alone}}

	during, noisy := fb.duringFlood(ctx, writers)
	out = append(out, report.Result{Scenario: "flood", Case: "quiet tenant, during the noisy one's flood", Params: params, Summary: during,
		Extra: map[string]float64{
			"noisy_accepted_per_s":    noisy.acceptedPerSec,
			"noisy_refused_429_per_s": noisy.refusedPerSec,
			"noisy_failed":            noisy.failed,
			"p99_ratio":               during.P99 / max(alone.P99, 0.001),
		}})
	return out, nil
}

// floodTenants makes the two tenants as the admin (floodTenantSpecs) and
// creates each grant's root node first: a tenant's make_parents creates
// ancestors only at or below its grant, so on a fresh cluster its first
// write under base/… was refused (forbidden) until something else had
// made base. It returns their tokens by name.
func floodTenants(ctx context.Context, adm *sdk.Client, base, quietName, noisyName string, quota int) (map[string]string, error) {
	tenants := floodTenantSpecs(base, quietName, noisyName, quota)
	for _, root := range grantRoots(tenants) {
		if _, err := adm.Put(ctx, root, nil, sdk.MakeParents()); err != nil {
			return nil, fmt.Errorf("grant root %s: %w", root, err)
		}
	}
	tokens := map[string]string{}
	for _, t := range tenants {
		resp, err := adm.PutTenant(ctx, t, true)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.Name, err)
		}
		tokens[t.Name] = resp.Token
	}
	return tokens, nil
}

// floodTenantSpecs are the two tenants: the quiet one may lock and write
// under base/quiet, the noisy one write under base/noisy within quota.
func floodTenantSpecs(base, quietName, noisyName string, quota int) []api.Tenant {
	return []api.Tenant{
		{Name: quietName, Grants: []api.Grant{{Prefix: base + "/quiet", Roles: []api.Role{api.RoleLock, api.RoleWrite}}}},
		{Name: noisyName, Grants: []api.Grant{{Prefix: base + "/noisy", Roles: []api.Role{api.RoleWrite}}},
			Quota: api.Quota{WritesPerSec: quota}},
	}
}

// grantRoots are the nodes the admin creates before the tenants write:
// every grant's prefix.
func grantRoots(tenants []api.Tenant) []string {
	var roots []string
	for _, t := range tenants {
		for _, g := range t.Grants {
			roots = append(roots, g.Prefix)
		}
	}
	return roots
}

// quietLockPath is the lock the quiet tenant takes and releases.
func quietLockPath(base string) string { return base + "/quiet/lock" }

// noisyPath is the value writer w of the noisy tenant puts on its i-th
// write (64 values per writer).
func noisyPath(base string, w, i int) string { return fmt.Sprintf("%s/noisy/w%d-%d", base, w, i%64) }

// floodBench is the two tenants' clients.
type floodBench struct {
	e            *env
	base         string
	quiet, noisy *sdk.Client
}

// newFloodBench connects a client for each tenant by its token.
func newFloodBench(ctx context.Context, e *env, base, quietToken, noisyToken string) (*floodBench, error) {
	tenantClient := func(token string) (*sdk.Client, error) {
		return sdk.New(ctx, sdk.Config{Endpoints: e.endpoints, Lease: e.lease, Direct: !e.viaProxies, AuthToken: token})
	}
	quiet, err := tenantClient(quietToken)
	if err != nil {
		return nil, err
	}
	noisy, err := tenantClient(noisyToken)
	if err != nil {
		quiet.Close()
		return nil, err
	}
	return &floodBench{e: e, base: base, quiet: quiet, noisy: noisy}, nil
}

// close closes the noisy tenant's client, then the quiet one's.
func (fb *floodBench) close() {
	fb.noisy.Close()
	fb.quiet.Close()
}

// quietLoop is the quiet tenant's Lock+Unlock on one worker for the run's
// duration.
func (fb *floodBench) quietLoop(ctx context.Context, name string) stats.Summary {
	lockPath := quietLockPath(fb.base)
	rec := stats.NewRecorder(time.Now())
	elapsed := fb.e.loop(ctx, name, 1, rec, func(ctx context.Context, _, _ int) error {
		m := fb.quiet.NewMutex(lockPath)
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(context.WithoutCancel(ctx))
	})
	return rec.Summarise(elapsed)
}

// floodRates is what the noisy tenant's writes got during the flood.
type floodRates struct {
	acceptedPerSec, refusedPerSec, failed float64
}

// duringFlood runs the quiet loop during the flood: writers put 100-byte
// values as fast as they are answered, for a second before the quiet loop
// and until it ends.
func (fb *floodBench) duringFlood(ctx context.Context, writers int) (stats.Summary, floodRates) {
	fctx, stop := context.WithCancel(ctx)
	var accepted, refused, failed atomic.Int64
	var wg sync.WaitGroup
	value := make([]byte, 100)
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; fctx.Err() == nil; i++ {
				_, err := fb.noisy.Put(fctx, noisyPath(fb.base, w, i), value, sdk.MakeParents())
				switch {
				case err == nil:
					accepted.Add(1)
				case fctx.Err() != nil:
					return
				case api.CodeOf(err) == api.CodeQuotaExceeded:
					refused.Add(1)
				default:
					failed.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(time.Second) // the flood at full rate before measuring
	during := fb.quietLoop(ctx, "flood: quiet during the flood")
	stop()
	wg.Wait()
	secs := time.Since(start).Seconds()
	return during, floodRates{float64(accepted.Load()) / secs, float64(refused.Load()) / secs, float64(failed.Load())}
}
