package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// The set-up phase of Run: the run's directory, the network namespaces,
// the cluster (two cells: demo and side), the lockproxies, the fenced
// resource and the executor's admin client with the workloads' tenant.
// Each piece registers its cleanup (run.onClose).

// setUp builds everything the workloads and the faults run on.
func (r *run) setUp(ctx context.Context) error {
	if err := r.makeDir(); err != nil {
		return err
	}
	if err := r.makeNetwork(); err != nil {
		return err
	}
	if err := r.startCluster(); err != nil {
		return err
	}
	bin, err := holderBinary()
	if err != nil {
		return err
	}
	r.holderBin = bin
	if err := r.startProxies(); err != nil {
		return err
	}
	if err := r.startClients(ctx); err != nil {
		return err
	}
	return r.prepareTenant()
}

// makeDir makes the directory of the cluster's data and logs (cfg.Dir, or
// a temporary one removed at the end unless a violation was found).
func (r *run) makeDir() error {
	dir, keep := r.cfg.Dir, r.cfg.Dir != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "chaos-"); err != nil {
			return err
		}
	}
	r.dir, r.rep.Dir = dir, dir
	r.onClose(func() {
		if !keep && r.rep.Violations == 0 {
			_ = os.RemoveAll(dir)
			r.rep.Dir = ""
		}
	})
	return nil
}

// makeNetwork gives each replica a network namespace (partitions by
// blackhole routes), unless the run is told to go without.
func (r *run) makeNetwork() error {
	cluster.SweepNetns(r.logf)
	if r.cfg.NoPartitions || os.Getenv("CHAOS_NO_PARTITIONS") == "1" {
		r.rep.Network = "loopback (partition nemeses skipped: -no-partitions or CHAOS_NO_PARTITIONS=1)"
		return nil
	}
	nn, err := cluster.NewNetns(5, r.logf)
	if err != nil {
		return fmt.Errorf("network namespaces unavailable, so the partition nemeses cannot run (set CHAOS_NO_PARTITIONS=1 to run without them): %w", err)
	}
	r.nn = nn
	r.rep.Network = fmt.Sprintf("one network namespace per replica, bridge %s, partitions by blackhole routes", nn.Bridge())
	r.onClose(func() {
		if err := nn.Close(); err != nil {
			r.logf("chaos: netns cleanup: %v", err)
		}
	})
	return nil
}

// startCluster starts the five lockds (tokens required: the workloads are
// a tenant, the executor and the proxies the admin), built with the fsync
// faults, with the cells demo and side (the cell the move nemeses move
// /side to and from).
func (r *run) startCluster() error {
	cfg := r.cfg
	r.adminToken = newAdminToken()
	opts := cluster.Options{
		AdminToken:     r.adminToken,
		Replicas:       5,
		RTTMillisecond: cfg.RTTMillisecond,
		Lease:          cfg.Lease,
		Cells: []cluster.CellSpec{{Name: cellName, ShardID: 1, Prefixes: []string{"/demo"}, Timing: cfg.CellTiming},
			{Name: sideCell, ShardID: 2, Prefixes: []string{sidePrefix}, Timing: cfg.CellTiming}},
		RaftDelay: cfg.RaftDelay,
		// As lockd ships (--balance-leaders): its planned hand-overs
		// (server/cell/handover.go) run under the faults.
		BalanceLeaders: true,
		Dir:            filepath.Join(r.dir, "cluster"),
		StartTimeout:   2 * time.Minute,
		LeaderTimeout:  30 * time.Second,
		Logf:           r.logf,
	}
	if r.nn != nil {
		opts.Network = r.nn
	}
	if cfg.RaftDelay.Max > 0 {
		r.rep.Network += fmt.Sprintf("; Raft through relays adding %v to %v each way; cells' timing %s", cfg.RaftDelay.Min, cfg.RaftDelay.Max, cfg.CellTiming)
	}
	if cfg.SnapshotEntries > 0 {
		opts.ExtraArgs = append(opts.ExtraArgs, "--snapshot-entries", fmt.Sprint(cfg.SnapshotEntries))
	}
	r.backupDir = filepath.Join(r.dir, "backups")
	opts.ExtraArgs = append(opts.ExtraArgs, "--backup-dir", r.backupDir)
	fsyncDir, restoreEnv, err := faultsLockd(r.dir)
	if err != nil {
		return err
	}
	r.fsyncDir = fsyncDir
	r.onClose(restoreEnv)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return err
	}
	c, err := cluster.New(opts)
	if c != nil {
		r.onClose(c.Close)
	}
	if err != nil {
		if c != nil {
			r.logf("%s", c.LogTails(30))
		}
		return fmt.Errorf("cluster: %w", err)
	}
	r.c = c
	return nil
}

// startProxies starts two lockproxies, unless cfg.NoProxies: the second
// parks its clients' held KeepAlives (--park-keepalives), the first holds
// them in its workers, so that the faults meet both.
func (r *run) startProxies() error {
	if r.cfg.NoProxies {
		return nil
	}
	for i := 1; i <= 2; i++ {
		var args []string
		if i == 2 {
			args = append(args, "--park-keepalives")
		}
		p, err := r.c.StartProxy(fmt.Sprintf("proxy-%d", i), args...)
		if err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		r.proxies = append(r.proxies, p)
		r.proxyAddrs = append(r.proxyAddrs, p.Addr)
	}
	r.rep.Proxies = len(r.proxies)
	return nil
}

// startClients serves the fenced resource and makes the workloads'
// environment, whose context ends with the workloads, and the executor's
// admin client.
func (r *run) startClients(ctx context.Context) error {
	r.res = NewResource(r.h)
	resURL, stopRes, err := r.res.Serve()
	if err != nil {
		return err
	}
	r.resURL = resURL
	r.onClose(stopRes)
	wctx, wcancel := context.WithCancel(ctx)
	r.wcancel = wcancel
	r.onClose(wcancel)
	r.e = &env{h: r.h, res: r.res, cfg: r.cfg, endpoints: r.c.Endpoints(), ctx: wctx, logf: r.logf, proxies: len(r.proxies) > 0, adminToken: r.adminToken}
	r.onClose(r.e.closeClients)
	r.admin, err = r.e.newClient("admin", false, 0)
	return err
}

// prepareTenant puts the workloads' tenant, reads the epoch of /demo (the
// high bits of its tokens), and creates the config keys' parent, so that
// the keys themselves start absent and a create of one can only fail
// because it exists.
func (r *run) prepareTenant() error {
	e := r.e
	tctx, tcancel := e.callCtx()
	token, err := putTenant(tctx, r.admin, workloadTenant, workloadGrant, sideGrant)
	tcancel()
	if err != nil {
		return err
	}
	e.tenantToken = token
	e.epoch = 1
	if pi, ok := r.admin.Directory().Prefix("/demo"); ok {
		e.epoch = pi.Epoch
	}
	pctx, pcancel := e.callCtx()
	_, err = r.admin.Put(pctx, configBase, nil, sdk.MakeParents())
	pcancel()
	if err != nil {
		return fmt.Errorf("create %s: %w", configBase, err)
	}
	return nil
}
