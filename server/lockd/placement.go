package lockd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/cell"
	"github.com/lockservice/lockd/server/fsm"
)

// bootView is the directory a new cluster starts from: the bootstrap
// members host the directory group and a replica of every bootstrap cell
// (replica id = lockd id). The directory group commits the same as its
// first entry; until this lockd has read the group, it routes by this.
func bootView(cfg Config) api.DirectoryResponse {
	var d api.DirectoryResponse
	var reps []api.ReplicaInfo
	for _, p := range cfg.Peers {
		l := api.LockdInfo{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr}
		if p.ID == cfg.ReplicaID {
			l.Zone = cfg.Zone
		}
		d.Lockds = append(d.Lockds, l)
		reps = append(reps, api.ReplicaInfo{ReplicaID: p.ID, Lockd: p.ID, APIAddr: p.APIAddr, Initial: true})
		d.Directory.Endpoints = append(d.Directory.Endpoints, p.APIAddr)
	}
	d.Directory.Name, d.Directory.ShardID, d.Directory.Replicas = "directory", directory.ShardID, reps
	for _, cc := range cfg.Cells {
		ci := api.CellInfo{Name: cc.Name, ShardID: cc.ShardID, Prefixes: cc.Prefixes, Replicas: reps, Endpoints: d.Directory.Endpoints}
		if !cc.Timing.IsZero() {
			t := cc.Timing
			ci.Timing = &t
		}
		d.Cells = append(d.Cells, ci)
		for _, p := range cc.Prefixes {
			d.Prefixes = append(d.Prefixes, api.PrefixInfo{Prefix: p, Cell: cc.Name, Epoch: max(cc.Epoch, 1)})
		}
	}
	return d
}

// bootstrapCommand is bootView as the directory group's first entry.
func bootstrapCommand(cfg Config) *dirfsm.Command {
	b := &dirfsm.Bootstrap{}
	for _, p := range cfg.Peers {
		b.Lockds = append(b.Lockds, api.LockdInfo{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr})
		b.DirectoryLockds = append(b.DirectoryLockds, p.ID)
	}
	for _, cc := range cfg.Cells {
		bc := dirfsm.BootCell{Name: cc.Name, ShardID: cc.ShardID, Prefixes: cc.Prefixes, Epoch: cc.Epoch}
		if !cc.Timing.IsZero() {
			t := cc.Timing
			bc.Timing = &t
		}
		for _, p := range cfg.Peers {
			bc.Lockds = append(bc.Lockds, p.ID)
		}
		b.Cells = append(b.Cells, bc)
	}
	return &dirfsm.Command{Op: dirfsm.OpBootstrap, Bootstrap: b}
}

// hostedReplica is one replica this lockd runs, as it records them in its
// data directory (replicas.json) so that a restart brings them back
// without the directory.
type hostedReplica struct {
	Cell      string `json:"cell"`
	ShardID   uint64 `json:"shard_id"`
	ReplicaID uint64 `json:"replica_id"`
	Learner   bool   `json:"learner,omitempty"`
	// EpochFloors: a replica imported from a backup (lockd restore)
	// serves nothing below these epochs (cell.Config.EpochFloors).
	EpochFloors map[string]uint64 `json:"epoch_floors,omitempty"`
	// LeaderEpochFloor: its cell's first leader after the restore starts
	// at this leader epoch at least, and serves only the prefixes of
	// EpochFloors (cell.Config.LeaderEpochFloor; 0: not restored, or
	// restored by a plan from before restores were counted).
	LeaderEpochFloor uint64 `json:"leader_epoch_floor,omitempty"`
	// Timing is the cell's own timing, so a restart runs the replica on
	// it before the directory is read.
	Timing *api.CellTiming `json:"timing,omitempty"`
}

// restoreFloors is what a replica imported from a backup holds its cell
// to before it serves (the restore plan's epochs and leader epoch floor).
type restoreFloors struct {
	Prefixes    map[string]uint64
	LeaderEpoch uint64
}

// floors are the replica's restore floors (none if it was not restored).
func (r hostedReplica) floors() restoreFloors {
	return restoreFloors{Prefixes: r.EpochFloors, LeaderEpoch: r.LeaderEpochFloor}
}

func replicasFile(dataDir string) string { return filepath.Join(dataDir, "replicas.json") }

func readReplicas(dataDir string) ([]hostedReplica, error) {
	b, err := os.ReadFile(replicasFile(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hostedReplica
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", replicasFile(dataDir), err)
	}
	return out, nil
}

// writeReplicas replaces the record atomically.
func writeReplicas(dataDir string, reps []hostedReplica) error {
	sort.Slice(reps, func(i, j int) bool { return reps[i].Cell < reps[j].Cell })
	b, _ := json.MarshalIndent(reps, "", "  ")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	tmp := replicasFile(dataDir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, replicasFile(dataDir))
}

// saveReplicas records the replicas running now (cellsMu held).
func (p *Process) saveReplicas() error {
	var out []hostedReplica
	for _, c := range p.cells {
		// The flag it joined with, even once promoted: a restart replays
		// the log from its add as a non-voting replica, which Raft
		// refuses on a voter; the promotion in the log (or the snapshot's
		// membership) makes it a voter again.
		out = append(out, hostedReplica{Cell: c.Info().Name, ShardID: c.Info().ShardID, ReplicaID: c.ReplicaID(), Learner: c.Learner(), EpochFloors: c.EpochFloors(),
			LeaderEpochFloor: c.LeaderEpochFloor(), Timing: c.Info().Timing})
	}
	return writeReplicas(p.cfg.DataDir, out)
}

// startCell starts this lockd's replica of a cell (cellsMu held, or
// before the API serves). members: the initial members of a new cell;
// join: added later (a learner if learner).
func (p *Process) startCell(info api.CellInfo, replicaID uint64, members map[uint64]string, join, learner bool, floors restoreFloors) error {
	if _, ok := p.cells[info.Name]; ok {
		return nil
	}
	// StopReplica returned before dragonboat's engine let go of the
	// shard's last replica here; starting the next one before it has
	// panics the engine ("from two incarnations found").
	if !p.unloads.before(info.ShardID, unloadTimeout) {
		p.log.Warn("the shard's previous replica did not unload in time; starting anyway", "cell", info.Name, "timeout", unloadTimeout)
	}
	cc := cell.Config{
		Info: api.CellInfo{Name: info.Name, ShardID: info.ShardID, Timing: info.Timing}, ReplicaID: replicaID, Members: members, Join: join, Learner: learner, EpochFloors: floors.Prefixes, LeaderEpochFloor: floors.LeaderEpoch,
		ElectionRTT: p.cfg.ElectionRTT, HeartbeatRTT: p.cfg.HeartbeatRTT,
		SnapshotEntries: p.cfg.SnapshotEntries, CompactionOverhead: p.cfg.CompactionOverhead,
		DefaultLease: time.Duration(p.cfg.Lease), Logger: p.log,
		Fanout: observeFanout(p.fanout, info.Name), JSONLog: p.cfg.JSONLog,
	}
	if t := info.Timing; t != nil {
		// The cell's own timing, in this NodeHost's ticks.
		cc.HeartbeatRTT = api.Ticks(t.HeartbeatMS, p.cfg.RTTMillisecond, p.cfg.HeartbeatRTT)
		cc.ElectionRTT = api.Ticks(t.ElectionMS, p.cfg.RTTMillisecond, p.cfg.ElectionRTT)
		cc.ElectionRTT = max(cc.ElectionRTT, 5*cc.HeartbeatRTT)
		if t.LeaseMS > 0 {
			cc.DefaultLease = time.Duration(t.LeaseMS) * time.Millisecond
		}
		cc.KeepAlive = time.Duration(t.KeepAliveMS) * time.Millisecond
		cc.Grace = time.Duration(t.GraceMS) * time.Millisecond
	}
	c, err := cell.Start(p.nh, cc)
	if err != nil {
		return err
	}
	p.cells[info.Name] = c
	p.listener.register(info.ShardID, c)
	p.cellMetrics[info.Name] = registerCellMetrics(p.metrics, c)
	p.log.Info("replica started", "cell", info.Name, "shard", info.ShardID, "replica_id", replicaID, "join", join)
	return p.saveReplicas()
}

// stopCell stops a replica removed from its cell (cellsMu held). The
// shard's next replica on this NodeHost (removed and added again) waits in
// startCell until dragonboat has unloaded this one.
func (p *Process) stopCell(c *cell.Cell) {
	name := c.Info().Name
	shard, replica := c.Info().ShardID, c.ReplicaID()
	unloaded := p.unloads.expect(shard, replica)
	stopped, err := c.Stop()
	if err != nil {
		p.log.Warn("stopping a removed replica", "cell", name, "err", err)
	}
	p.unloads.stopped(shard, replica, unloaded, stopped)
	delete(p.cells, name)
	p.listener.unregister(c.Info().ShardID)
	for _, col := range p.cellMetrics[name] {
		p.metrics.Unregister(col)
	}
	delete(p.cellMetrics, name)
	if err := p.saveReplicas(); err != nil {
		p.log.Warn("recording replicas", "err", err)
	}
	p.log.Info("replica removed from its cell: stopped", "cell", name, "replica_id", c.ReplicaID())
}

// reconcile brings this lockd in line with a directory view: it starts
// the replicas the directory places here and tells every running replica
// its peers' addresses and the prefixes (and epochs) its cell serves.
func (p *Process) reconcile(view *directory.Directory) error {
	p.cellsMu.Lock()
	defer p.cellsMu.Unlock()
	if p.belowFloor(view) {
		return p.leaveCells(view)
	}
	self := p.cfg.ReplicaID
	lockds := map[uint64]api.LockdInfo{}
	for _, l := range view.Response().Lockds {
		lockds[l.ID] = l
	}
	prefixes := map[string]map[string]cell.PrefixPlacement{}
	for _, pi := range view.Prefixes() {
		if prefixes[pi.Cell] == nil {
			prefixes[pi.Cell] = map[string]cell.PrefixPlacement{}
		}
		leaving := pi.Migration != nil && pi.Migration.Phase == api.MigrationSealing
		arriving := pi.Migration != nil && pi.Migration.Phase == api.MigrationCommitted
		prefixes[pi.Cell][pi.Prefix] = cell.PrefixPlacement{Epoch: pi.Epoch, Leaving: leaving, Arriving: arriving}
	}
	var firstErr error
	for _, info := range view.Cells() {
		var mine *api.ReplicaInfo
		members := map[uint64]string{}
		apiAddrs := map[uint64]string{}
		for i, r := range info.Replicas {
			apiAddrs[r.ReplicaID] = r.APIAddr
			if r.Initial {
				members[r.ReplicaID] = lockds[r.Lockd].RaftAddr
			}
			if r.Lockd == self {
				mine = &info.Replicas[i]
			}
		}
		if c, ok := p.cells[info.Name]; ok && mine != nil && c.ReplicaID() != mine.ReplicaID && view.Index() > 0 {
			if mine.ReplicaID < c.ReplicaID() {
				// Replica ids only grow: this view predates the replica
				// running here (the local directory replica replaying its
				// log after a restart, before a restore placed it). It
				// says nothing new of this cell.
				continue
			}
			// Removed and added again (or restored here): the old replica
			// goes, the new one (a new replica id) joins.
			p.stopCell(c)
		}
		_, hosted := p.cells[info.Name]
		switch {
		case mine != nil && mine.Restored && !hosted:
			// Planned by lockctl restore: it starts from the backup that
			// lockd restore imports, never empty.
			p.log.Debug("replica waits for lockd restore", "cell", info.Name, "replica_id", mine.ReplicaID)
		case mine != nil:
			if err := p.startCell(info, mine.ReplicaID, members, !mine.Initial, mine.JoinedLearner, restoreFloors{}); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("cell %s: %w", info.Name, err)
			}
		case hosted && view.Index() > 0:
			// The directory removed this lockd's replica (member remove,
			// confirmed, or a restore that placed the cell elsewhere):
			// stop it for good.
			p.stopCell(p.cells[info.Name])
			continue
		}
		if c, ok := p.cells[info.Name]; ok {
			c.SetPlacement(cell.Placement{APIAddrs: apiAddrs, Prefixes: prefixes[info.Name], Index: view.Index(), LogCodec: fsm.LogCodec(view.LogCodec())})
		}
	}
	return firstErr
}

// followDirectory keeps the view current and this lockd in it: a
// directory replica proposes the bootstrap once and reads its own copy
// after every applied entry; another lockd polls the directory replicas.
// Each lockd registers itself (its addresses and zone) until the
// directory has it.
func (p *Process) followDirectory() {
	defer p.wg.Done()
	var lastApplied uint64
	var lastAsk time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for polls := 0; ; polls++ {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		var resp api.DirectoryResponse
		var ok bool
		if p.dir != nil {
			if a := p.dir.Applied(); a != lastApplied || polls%50 == 0 {
				lastApplied = a
				resp, ok = p.dir.Local()
			}
		} else if polls%5 == 0 {
			resp, ok = p.pollDirectory(context.Background()) // each replica in turn, peerTimeout each
		}
		if ok && resp.Index > 0 && len(resp.Lockds) > 0 {
			p.adoptView(resp)
		}
		if time.Since(lastAsk) < time.Second {
			continue
		}
		view := p.view.Load()
		switch {
		case p.dir != nil && view.Index() == 0:
			lastAsk = time.Now()
			p.proposeBackground(bootstrapCommand(p.cfg))
		case view.Index() > 0 && !p.registered(view):
			lastAsk = time.Now()
			p.proposeBackground(&dirfsm.Command{Op: dirfsm.OpRegister, Lockd: ptr(p.selfInfo())})
		case view.Index() > 0:
			lastAsk = time.Now()
			p.raiseCodecFloor(view)
		}
	}
}

// adoptView installs a directory read if it is newer than the view.
func (p *Process) adoptView(resp api.DirectoryResponse) {
	if resp.Index <= p.view.Load().Index() {
		return
	}
	d, err := directory.New(resp)
	if err != nil {
		p.log.Error("the directory group serves an invalid directory", "index", resp.Index, "err", err)
		return
	}
	p.view.Store(d)
	if err := p.reconcile(d); err != nil {
		p.log.Warn("placing replicas", "err", err)
	}
}

func (p *Process) registered(view *directory.Directory) bool {
	l, ok := view.Lockd(p.cfg.ReplicaID)
	return ok && l == p.selfInfo()
}

func ptr[T any](v T) *T { return &v }

func (p *Process) proposeBackground(c *dirfsm.Command) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := p.ProposeDirectory(ctx, c); err != nil {
		if api.CodeOf(err) != api.CodeUnavailable {
			p.log.Warn("directory command refused", "op", c.Op, "err", err)
		}
	}
}

// directoryAddrs are the API addresses of the directory's replicas.
func (p *Process) directoryAddrs() []string {
	if eps := p.view.Load().Response().Directory.Endpoints; len(eps) > 0 {
		return eps
	}
	var out []string
	for _, peer := range p.cfg.Peers {
		out = append(out, peer.APIAddr)
	}
	return out
}

// pollDirectory reads the directory from a directory replica over HTTP,
// within ctx.
func (p *Process) pollDirectory(ctx context.Context) (api.DirectoryResponse, bool) {
	for _, addr := range p.directoryAddrs() {
		within := peerTimeout
		if d, ok := ctx.Deadline(); ok {
			within = min(within, time.Until(d))
		}
		if within <= 0 {
			break
		}
		var resp api.DirectoryResponse
		if err := p.peerCallWithin(within, addr, "GET", api.RouteDirectory, nil, &resp); err == nil {
			return resp, true
		}
	}
	return api.DirectoryResponse{}, false
}

// peerTimeout bounds one API call to another lockd.
const peerTimeout = 5 * time.Second

// peerCall makes one API call to another lockd.
func (p *Process) peerCall(addr, method, route string, body, out any) error {
	return p.peerCallWithin(peerTimeout, addr, method, route, body, out)
}

func (p *Process) peerCallWithin(within time.Duration, addr, method, route string, body, out any) error {
	return callPeer(p.peers, within, addr, method, route, body, out)
}

// callPeer makes one API call to a lockd with client: its reply decoded
// into out, its error as the API's (unavailable if it did not answer).
func callPeer(pc peerClient, within time.Duration, addr, method, route string, body, out any) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(pc.scheme + "://" + addr + route)
	req.Header.SetMethod(method)
	if pc.token != "" {
		req.Header.Set(api.HeaderAuth, "Bearer "+pc.token)
	}
	if pc.forwarded {
		req.Header.Set(api.HeaderForwarded, "1")
	}
	client := pc.http
	if body != nil {
		b, _ := json.Marshal(body)
		req.SetBody(b)
		req.Header.SetContentType("application/json")
	}
	if err := client.DoTimeout(req, resp, within); err != nil {
		return api.Errorf(api.CodeUnavailable, "%s: %v", addr, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		var er api.ErrorResponse
		if json.Unmarshal(resp.Body(), &er) == nil && er.Error != nil {
			return er.Error
		}
		return api.Errorf(api.CodeUnavailable, "%s: HTTP %d", addr, resp.StatusCode())
	}
	return json.Unmarshal(resp.Body(), out)
}

// peerClient is how a lockd calls another's API: over TLS with its own
// certificate when the cluster runs TLS, with the admin token when it
// requires tokens.
type peerClient struct {
	http          *fasthttp.Client
	token, scheme string
	forwarded     bool // marks the call as made for another's client (Lockd-Forwarded)
}

func newPeerClient(cfg Config, name string) (peerClient, error) {
	pc := peerClient{http: &fasthttp.Client{Name: name, ReadTimeout: peerTimeout, WriteTimeout: peerTimeout}, scheme: "http"}
	if cfg.TLSFiles().Set() {
		tc, err := cfg.TLSFiles().Client()
		if err != nil {
			return pc, err
		}
		pc.http.TLSConfig, pc.scheme = tc, "https"
	}
	if cfg.AdminTokenFile != "" {
		tok, err := ReadToken(cfg.AdminTokenFile)
		if err != nil {
			return pc, err
		}
		pc.token = tok
	}
	return pc, nil
}

// ReadDirectory is GET /v1/directory, linearizable: a client re-reads
// after moved, or for a cell its view lacks (one created a moment ago),
// and must not get an older map than the one that sent it. A directory
// replica reads its own; another lockd reads one of the replicas (its
// own view, which follows the directory by polling, lags by up to half a
// second), and answers its view only if none of them answers.
func (p *Process) ReadDirectory(ctx context.Context) (api.DirectoryResponse, error) {
	if p.dir == nil {
		if resp, ok := p.pollDirectory(ctx); ok && resp.Index > 0 && !mutant.On(mutant.DirViewRead) {
			p.adoptView(resp)
			if resp.Index >= p.view.Load().Index() {
				return resp, nil
			}
		}
		return p.view.Load().Response(), nil
	}
	resp, err := p.dir.Read(ctx)
	if err != nil {
		return api.DirectoryResponse{}, err
	}
	if resp.Index == 0 || len(resp.Lockds) == 0 {
		return p.view.Load().Response(), nil // not bootstrapped yet: the flags' view
	}
	p.adoptView(resp)
	return resp, nil
}

// RefreshDirectory reads the directory now (linearizably on a directory
// replica, from one over HTTP elsewhere) and adopts it if newer.
func (p *Process) RefreshDirectory(ctx context.Context) {
	if p.dir != nil {
		_, _ = p.ReadDirectory(ctx)
		return
	}
	if resp, ok := p.pollDirectory(ctx); ok && resp.Index > 0 {
		p.adoptView(resp)
	}
}

// ProposeDirectory commits a directory command on this lockd's directory
// replica (a follower forwards it to the leader); a lockd without one
// passes it to one that has.
func (p *Process) ProposeDirectory(ctx context.Context, c *dirfsm.Command) (dirfsm.Result, error) {
	if p.dir != nil {
		res, err := p.dir.Propose(ctx, c)
		if err == nil {
			if resp, ok := p.dir.Local(); ok {
				p.adoptView(resp)
			}
		}
		return res, err
	}
	var last error = api.Errorf(api.CodeUnavailable, "no directory replica known")
	for _, addr := range p.directoryAddrs() {
		var res dirfsm.Result
		route, body := directoryRoute(c)
		err := p.peerCall(addr, "POST", route, body, &res)
		if err == nil || api.CodeOf(err) != api.CodeUnavailable {
			return res, err
		}
		last = err
	}
	return dirfsm.Result{}, last
}

// directoryRoute is the admin route and body that carry c.
func directoryRoute(c *dirfsm.Command) (string, any) {
	switch c.Op {
	case dirfsm.OpRegister:
		return api.RouteAdminRegister, api.RegisterLockdRequest{LockdInfo: *c.Lockd}
	case dirfsm.OpCreateCell:
		return api.RouteAdminCellCreate, c.CreateCell
	case dirfsm.OpAssign:
		return api.RouteAdminPrefixAssign, c.Assign
	case dirfsm.OpMigrate:
		return api.RouteAdminMigrate, c.Migrate
	case dirfsm.OpRestore:
		return api.RouteAdminRestore, c.Restore
	case dirfsm.OpTenant:
		return api.RouteAdminTenantCommit, c.Tenant
	case dirfsm.OpMember:
		return api.RouteAdminMemberRecord, c.Member
	}
	return "/v1/admin/none", nil
}
