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
	quietT := api.Tenant{Name: "quiet-" + e.run, Grants: []api.Grant{{Prefix: base + "/quiet", Roles: []api.Role{api.RoleLock, api.RoleWrite}}}}
	noisyT := api.Tenant{Name: "noisy-" + e.run, Grants: []api.Grant{{Prefix: base + "/noisy", Roles: []api.Role{api.RoleWrite}}},
		Quota: api.Quota{WritesPerSec: quota}}
	tokens := map[string]string{}
	for _, t := range []api.Tenant{quietT, noisyT} {
		resp, err := adm.PutTenant(ctx, t, true)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.Name, err)
		}
		tokens[t.Name] = resp.Token
	}
	defer func() {
		for name := range tokens {
			_, _ = adm.DeleteTenant(context.WithoutCancel(ctx), name)
		}
	}()
	tenantClient := func(name string) (*sdk.Client, error) {
		return sdk.New(ctx, sdk.Config{Endpoints: e.endpoints, Lease: e.lease, Direct: !e.viaProxies, AuthToken: tokens[name]})
	}
	quiet, err := tenantClient(quietT.Name)
	if err != nil {
		return nil, err
	}
	defer quiet.Close()
	noisy, err := tenantClient(noisyT.Name)
	if err != nil {
		return nil, err
	}
	defer noisy.Close()
	if _, err := quiet.Session(ctx, "demo"); err != nil {
		return nil, err
	}
	lockPath := base + "/quiet/lock"
	quietLoop := func(name string) stats.Summary {
		rec := stats.NewRecorder(time.Now())
		elapsed := e.loop(ctx, name, 1, rec, func(ctx context.Context, _, _ int) error {
			m := quiet.NewMutex(lockPath)
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(context.WithoutCancel(ctx))
		})
		return rec.Summarise(elapsed)
	}
	params := map[string]string{"op": "Lock+Unlock", "workers": "1", "noisy_writers": strconv.Itoa(writers), "noisy_quota_per_s": strconv.Itoa(api.Quota{WritesPerSec: quota}.Effective().WritesPerSec)}
	alone := quietLoop("flood: quiet alone")
	out := []report.Result{{Scenario: "flood", Case: "quiet tenant, alone", Params: params, Summary: alone}}

	// The flood: writers put 100-byte values as fast as they are answered.
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
				_, err := noisy.Put(fctx, fmt.Sprintf("%s/noisy/w%d-%d", base, w, i%64), value, sdk.MakeParents())
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
	during := quietLoop("flood: quiet during the flood")
	stop()
	wg.Wait()
	secs := time.Since(start).Seconds()
	out = append(out, report.Result{Scenario: "flood", Case: "quiet tenant, during the noisy one's flood", Params: params, Summary: during,
		Extra: map[string]float64{
			"noisy_accepted_per_s":    float64(accepted.Load()) / secs,
			"noisy_refused_429_per_s": float64(refused.Load()) / secs,
			"noisy_failed":            float64(failed.Load()),
			"p99_ratio":               during.P99 / max(alone.P99, 0.001),
		}})
	return out, nil
}
