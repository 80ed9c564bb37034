package dirfsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// Ops of the directory group's log.
const (
	OpBootstrap  = "bootstrap"
	OpRegister   = "register"
	OpCreateCell = "create_cell"
	OpAssign     = "assign"
	OpMigrate    = "migrate"
	OpMember     = "member"
	OpRestore    = "restore"
	// OpRegisterProxy records a lockproxy (by name; a new address
	// replaces the old).
	OpRegisterProxy = "register_proxy"
	// OpTenant creates, changes or deletes a tenant (TenantChange).
	OpTenant = "tenant"
)

// TenantChange is a tenant's change as committed: the request, and the
// digest of the token the proposer made for it, if any (the token itself
// never enters the log).
type TenantChange struct {
	api.TenantRequest
	TokenDigest string `json:"token_digest,omitempty"`
}

// Command is one entry of the directory group's log.
type Command struct {
	Op         string                   `json:"op"`
	Bootstrap  *Bootstrap               `json:"bootstrap,omitempty"`
	Lockd      *api.LockdInfo           `json:"lockd,omitempty"`
	CreateCell *api.CreateCellRequest   `json:"create_cell,omitempty"`
	Assign     *api.AssignPrefixRequest `json:"assign,omitempty"`
	Migrate    *api.MigrateRequest      `json:"migrate,omitempty"`
	Member     *api.MemberRequest       `json:"member,omitempty"`
	Restore    *api.RestoreCellRequest  `json:"restore,omitempty"`
	Proxy      *api.ProxyInfo           `json:"proxy,omitempty"`
	Tenant     *TenantChange            `json:"tenant,omitempty"`
}

// Bootstrap is the first state of a new cluster, from the static flags of
// the lockds that host the directory group. It applies only to an empty
// directory: a lockd restarted with other flags changes nothing.
type Bootstrap struct {
	Lockds []api.LockdInfo `json:"lockds"`
	// DirectoryLockds host the directory group (replica id = lockd id).
	DirectoryLockds []uint64   `json:"directory_lockds"`
	Cells           []BootCell `json:"cells"`
}

// BootCell is a cell of the bootstrap flags: its replicas' ids are the
// ids of the lockds hosting them.
type BootCell struct {
	Name     string          `json:"name"`
	ShardID  uint64          `json:"shard_id"`
	Prefixes []string        `json:"prefixes"`
	Epoch    uint64          `json:"epoch,omitempty"`
	Lockds   []uint64        `json:"lockds"`
	Timing   *api.CellTiming `json:"timing,omitempty"`
}

// Encode serialises a command for the log.
func (c *Command) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("directory: encode command: %v", err)) // plain types only
	}
	return b
}

// Result is what applying a command returns to its proposer.
type Result struct {
	Err    *api.Error      `json:"err,omitempty"`
	Index  uint64          `json:"index"`
	Cell   *api.CellInfo   `json:"cell,omitempty"`
	Prefix *api.PrefixInfo `json:"prefix,omitempty"`
	Tenant *api.Tenant     `json:"tenant,omitempty"`
}

// replica is one replica of a cell, as the directory records it.
type replica struct {
	ReplicaID uint64 `json:"replica_id"`
	Lockd     uint64 `json:"lockd"`
	Learner   bool   `json:"learner,omitempty"`
	Initial   bool   `json:"initial,omitempty"`
	Pending   string `json:"pending,omitempty"`
	Joined    bool   `json:"joined_learner,omitempty"` // added as a learner
	Restored  bool   `json:"restored,omitempty"`       // starts only from an imported backup
}

type cellRec struct {
	Name        string    `json:"name"`
	ShardID     uint64    `json:"shard_id"`
	NextReplica uint64    `json:"next_replica"`
	Replicas    []replica `json:"replicas"`
	// RestoreIndex is the backup index of the latest restore plan.
	RestoreIndex uint64 `json:"restore_index,omitempty"`
	// Restores counts the cell's restore plans (api.CellInfo.Restores).
	Restores uint64 `json:"restores,omitempty"`
	// Timing is the cell's own timing, fixed at its creation (nil: the
	// lockds' defaults).
	Timing *api.CellTiming `json:"timing,omitempty"`
}

// State is the directory group's replicated state: pure and
// deterministic, like a cell's (no clock, no randomness, no I/O).
type State struct {
	index     uint64
	lockds    map[uint64]api.LockdInfo
	cells     map[string]*cellRec
	prefixes  map[string]*api.PrefixInfo
	dirLockds []uint64
	nextShard uint64
	proxies   map[string]api.ProxyInfo // by name
	tenants   map[string]api.Tenant    // by name
}

// NewState returns an empty directory.
func NewState() *State {
	return &State{lockds: map[uint64]api.LockdInfo{}, cells: map[string]*cellRec{}, prefixes: map[string]*api.PrefixInfo{}, nextShard: 1,
		proxies: map[string]api.ProxyInfo{}, tenants: map[string]api.Tenant{}}
}

// Index is the last applied index.
func (s *State) Index() uint64 { return s.index }

// Empty reports whether the directory was never bootstrapped.
func (s *State) Empty() bool { return len(s.lockds) == 0 && len(s.cells) == 0 }

// Apply applies one entry committed at index and returns its encoded
// Result. A refused command changes nothing.
func (s *State) Apply(index uint64, data []byte) []byte {
	if index <= s.index {
		panic(fmt.Sprintf("directory: apply index %d after %d", index, s.index))
	}
	s.index = index
	var c Command
	var res Result
	if err := json.Unmarshal(data, &c); err != nil {
		res.Err = api.Errorf(api.CodeBadRequest, "undecodable directory entry: %v", err)
	} else {
		res = s.apply(&c)
	}
	res.Index = index
	b, _ := json.Marshal(&res)
	return b
}

func (s *State) apply(c *Command) Result {
	if s.Empty() && c.Op != OpBootstrap {
		return refuse(api.CodeUnavailable, "the directory is not bootstrapped yet")
	}
	switch {
	case c.Op == OpBootstrap && c.Bootstrap != nil:
		return s.bootstrap(c.Bootstrap)
	case c.Op == OpRegister && c.Lockd != nil:
		return s.register(*c.Lockd)
	case c.Op == OpCreateCell && c.CreateCell != nil:
		return s.createCell(c.CreateCell)
	case c.Op == OpAssign && c.Assign != nil:
		return s.assign(c.Assign)
	case c.Op == OpMigrate && c.Migrate != nil:
		return s.migrate(c.Migrate)
	case c.Op == OpMember && c.Member != nil:
		return s.member(c.Member)
	case c.Op == OpRestore && c.Restore != nil:
		return s.restore(c.Restore)
	case c.Op == OpRegisterProxy && c.Proxy != nil:
		return s.registerProxy(*c.Proxy)
	case c.Op == OpTenant && c.Tenant != nil:
		return s.tenant(c.Tenant)
	}
	return Result{Err: api.Errorf(api.CodeBadRequest, "unknown or incomplete directory op %q", c.Op)}
}

// tenant applies a tenant change. Put keeps the tenant's tokens (and adds
// the new one's digest); the change is checked in full first.
func (s *State) tenant(c *TenantChange) Result {
	name := c.Tenant.Name
	old, exists := s.tenants[name]
	switch c.Action {
	case api.TenantPut:
		t := c.Tenant
		if err := t.Validate(); err != nil {
			return Result{Err: api.AsError(err)}
		}
		t.Tokens = slices.Clone(old.Tokens)
		if c.TokenDigest != "" {
			for other, ot := range s.tenants {
				if other != name && slices.Contains(ot.Tokens, c.TokenDigest) {
					return refuse(api.CodeConflict, "token already belongs to another tenant")
				}
			}
			if len(t.Tokens) >= api.MaxTenantTokens {
				return refuse(api.CodeLimitExceeded, "tenant %s has %d tokens, limit %d: revoke them first", name, len(t.Tokens), api.MaxTenantTokens)
			}
			t.Tokens = append(t.Tokens, c.TokenDigest)
		}
		s.tenants[name] = t
		return Result{Tenant: &t}
	case api.TenantRevoke, api.TenantDelete:
		if !exists {
			return refuse(api.CodeNotFound, "no tenant %q", name)
		}
		if c.Action == api.TenantDelete {
			delete(s.tenants, name)
			return Result{Tenant: &old}
		}
		old.Tokens = nil
		s.tenants[name] = old
		return Result{Tenant: &old}
	}
	return refuse(api.CodeBadRequest, "tenant action %q: use put, revoke or delete", c.Action)
}

func (s *State) tenantList() []api.Tenant {
	out := make([]api.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func refuse(code api.Code, format string, args ...any) Result {
	return Result{Err: api.Errorf(code, format, args...)}
}

func (s *State) bootstrap(b *Bootstrap) Result {
	if !s.Empty() {
		return Result{} // already bootstrapped: every later copy is a no-op
	}
	next := NewState()
	for _, l := range b.Lockds {
		if r := next.register(l); r.Err != nil {
			return r
		}
	}
	for _, id := range b.DirectoryLockds {
		if _, ok := next.lockds[id]; !ok {
			return refuse(api.CodeBadRequest, "directory replica on unknown lockd %d", id)
		}
	}
	next.dirLockds = slices.Clone(b.DirectoryLockds)
	for _, bc := range b.Cells {
		if err := checkCellName(bc.Name); err != nil {
			return Result{Err: err}
		}
		if _, dup := next.cells[bc.Name]; dup {
			return refuse(api.CodeBadRequest, "cell %s listed twice", bc.Name)
		}
		if bc.ShardID == 0 || bc.ShardID >= directory.ShardID {
			return refuse(api.CodeBadRequest, "cell %s: shard id %d outside [1, %d)", bc.Name, bc.ShardID, directory.ShardID)
		}
		for _, other := range next.cells {
			if other.ShardID == bc.ShardID {
				return refuse(api.CodeBadRequest, "cells %s and %s share shard id %d", other.Name, bc.Name, bc.ShardID)
			}
		}
		if err := checkTiming(bc.Timing); err != nil {
			return Result{Err: err}
		}
		cr := &cellRec{Name: bc.Name, ShardID: bc.ShardID, Timing: cloneTiming(bc.Timing)}
		for _, id := range bc.Lockds {
			if _, ok := next.lockds[id]; !ok {
				return refuse(api.CodeBadRequest, "cell %s: replica on unknown lockd %d", bc.Name, id)
			}
			cr.Replicas = append(cr.Replicas, replica{ReplicaID: id, Lockd: id, Initial: true})
			cr.NextReplica = max(cr.NextReplica, id+1)
		}
		next.cells[bc.Name] = cr
		next.nextShard = max(next.nextShard, bc.ShardID+1)
		epoch := max(bc.Epoch, 1)
		if epoch > api.MaxTokenEpoch {
			return refuse(api.CodeTokenExhausted, "cell %s: epoch %d over %d", bc.Name, epoch, uint64(api.MaxTokenEpoch))
		}
		for _, p := range bc.Prefixes {
			if err := checkPrefix(p); err != nil {
				return Result{Err: err}
			}
			if other, dup := next.prefixes[p]; dup {
				return refuse(api.CodeBadRequest, "prefix %s given to %s and %s", p, other.Cell, bc.Name)
			}
			next.prefixes[p] = &api.PrefixInfo{Prefix: p, Cell: bc.Name, Epoch: epoch}
		}
	}
	next.index = s.index
	*s = *next
	return Result{}
}

func (s *State) register(l api.LockdInfo) Result {
	if l.ID == 0 || l.RaftAddr == "" || l.APIAddr == "" {
		return refuse(api.CodeBadRequest, "a lockd needs an id, a raft address and an API address")
	}
	if old, ok := s.lockds[l.ID]; ok && old.RaftAddr != l.RaftAddr {
		// Raft addresses name replicas in every group it hosts: a lockd
		// that moved must be replaced (member add/remove), not renamed.
		return refuse(api.CodeConflict, "lockd %d is registered at raft address %s, not %s", l.ID, old.RaftAddr, l.RaftAddr)
	}
	for _, other := range s.lockds {
		if other.ID != l.ID && (other.RaftAddr == l.RaftAddr || other.APIAddr == l.APIAddr) {
			return refuse(api.CodeConflict, "lockd %d already uses the address of lockd %d", other.ID, l.ID)
		}
	}
	s.lockds[l.ID] = l
	return Result{}
}

func (s *State) registerProxy(p api.ProxyInfo) Result {
	if err := checkCellName(p.Name); err != nil {
		return refuse(api.CodeBadRequest, "proxy name: %s", err.Message)
	}
	if p.APIAddr == "" {
		return refuse(api.CodeBadRequest, "a proxy needs an API address")
	}
	for _, other := range s.proxies {
		if other.Name != p.Name && other.APIAddr == p.APIAddr {
			return refuse(api.CodeConflict, "proxy %s already uses the address %s", other.Name, p.APIAddr)
		}
	}
	s.proxies[p.Name] = p
	return Result{}
}

// proxyList is the proxies by name.
func (s *State) proxyList() []api.ProxyInfo {
	var out []api.ProxyInfo
	for _, p := range s.proxies {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func checkCellName(name string) *api.Error {
	if name == "" || len(name) > 64 {
		return api.Errorf(api.CodeBadRequest, "a cell name is 1 to 64 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return api.Errorf(api.CodeBadRequest, "cell name %q: use a-z, 0-9, - and _", name)
		}
	}
	return nil
}

func checkPrefix(p string) *api.Error {
	if err := api.ValidatePath(p); err != nil || api.Parent(p) != "/" {
		return api.Errorf(api.CodeInvalidPath, "%q is not a top-level prefix like /payments", p)
	}
	return nil
}

func (s *State) createCell(r *api.CreateCellRequest) Result {
	if err := checkCellName(r.Name); err != nil {
		return Result{Err: err}
	}
	if _, dup := s.cells[r.Name]; dup {
		return refuse(api.CodeConflict, "cell %s exists", r.Name)
	}
	n := r.Replicas
	if n == 0 {
		n = len(r.On)
	}
	if n == 0 {
		n = 5
	}
	if n != 3 && n != 5 {
		return refuse(api.CodeBadRequest, "a cell has 5 replicas (3 allowed), not %d", n)
	}
	var on []uint64
	if len(r.On) > 0 {
		if len(r.On) != n {
			return refuse(api.CodeBadRequest, "%d replicas asked for, %d lockds named", n, len(r.On))
		}
		if err := s.checkOn(r.On); err != nil {
			return Result{Err: err}
		}
		on = slices.Clone(r.On)
	} else {
		var err *api.Error
		if on, err = Place(s.lockdList(), s.load(), n); err != nil {
			return Result{Err: err}
		}
	}
	if s.nextShard >= directory.ShardID {
		return refuse(api.CodeConflict, "no shard id left")
	}
	if err := checkTiming(r.Timing); err != nil {
		return Result{Err: err}
	}
	cr := &cellRec{Name: r.Name, ShardID: s.nextShard, NextReplica: 1, Timing: cloneTiming(r.Timing)}
	s.nextShard++
	for _, id := range on {
		cr.Replicas = append(cr.Replicas, replica{ReplicaID: cr.NextReplica, Lockd: id, Initial: true})
		cr.NextReplica++
	}
	s.cells[r.Name] = cr
	info := s.cellInfo(cr)
	return Result{Cell: &info}
}

// checkOn checks lockds named for a cell's replicas: each known, none
// twice.
func (s *State) checkOn(on []uint64) *api.Error {
	seen := map[uint64]bool{}
	for _, id := range on {
		if _, ok := s.lockds[id]; !ok {
			return api.Errorf(api.CodeNotFound, "no lockd %d", id)
		}
		if seen[id] {
			return api.Errorf(api.CodeConflict, "two replicas of one cell on lockd %d: a process holds at most one replica of a cell", id)
		}
		seen[id] = true
	}
	return nil
}

func (s *State) lockdList() []api.LockdInfo {
	out := make([]api.LockdInfo, 0, len(s.lockds))
	for _, l := range s.lockds {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// load counts the replicas each lockd hosts (directory group included).
func (s *State) load() map[uint64]int {
	n := map[uint64]int{}
	for _, c := range s.cells {
		for _, r := range c.Replicas {
			n[r.Lockd]++
		}
	}
	for _, id := range s.dirLockds {
		n[id]++
	}
	return n
}

// Place picks n lockds for a new cell's replicas: never two on one lockd,
// as many zones as there are, and the least loaded lockds first (ties by
// id, so every replica of the directory places alike).
func Place(lockds []api.LockdInfo, load map[uint64]int, n int) ([]uint64, *api.Error) {
	if len(lockds) < n {
		return nil, api.Errorf(api.CodeConflict, "%d replicas need %d lockds; the directory knows %d", n, n, len(lockds))
	}
	picked := map[uint64]bool{}
	inZone := map[string]int{}
	var out []uint64
	for len(out) < n {
		var best *api.LockdInfo
		for i := range lockds {
			l := &lockds[i]
			if picked[l.ID] {
				continue
			}
			if best == nil || inZone[l.Zone] < inZone[best.Zone] ||
				inZone[l.Zone] == inZone[best.Zone] && (load[l.ID] < load[best.ID] || load[l.ID] == load[best.ID] && l.ID < best.ID) {
				best = l
			}
		}
		picked[best.ID] = true
		inZone[best.Zone]++
		out = append(out, best.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func (s *State) assign(r *api.AssignPrefixRequest) Result {
	if err := checkPrefix(r.Prefix); err != nil {
		return Result{Err: err}
	}
	if _, ok := s.cells[r.Cell]; !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if p, ok := s.prefixes[r.Prefix]; ok {
		if p.Cell == r.Cell && p.Migration == nil {
			return Result{Prefix: clonePrefix(p)} // already so
		}
		return refuse(api.CodeConflict, "prefix %s is served by cell %s: move it with lockctl migrate", r.Prefix, p.Cell)
	}
	p := &api.PrefixInfo{Prefix: r.Prefix, Cell: r.Cell, Epoch: 1}
	s.prefixes[r.Prefix] = p
	return Result{Prefix: clonePrefix(p)}
}

// minVoters is the fewest voting replicas a cell may be left with: a
// majority of five (three-replica cells have exactly this many).
const minVoters = 3

// member records one membership change of a cell, or confirms (done) or
// takes back (abort) the one in flight. One change at a time per cell;
// add, promote and remove mark the replica pending until the cell's leader
// confirms that its Raft group made the change.
func (s *State) member(r *api.MemberRequest) Result {
	c, ok := s.cells[r.Cell]
	if !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if _, ok := s.lockds[r.Lockd]; !ok {
		return refuse(api.CodeNotFound, "no lockd %d", r.Lockd)
	}
	at := -1
	var pending *replica
	voters := 0
	for i := range c.Replicas {
		rep := &c.Replicas[i]
		if rep.Lockd == r.Lockd {
			at = i
		}
		if rep.Pending != "" {
			pending = rep
		}
		if !rep.Learner {
			voters++
		}
	}
	busy := func() Result {
		return refuse(api.CodeConflict, "cell %s has a membership change in flight (%s of the replica on lockd %d): one at a time", r.Cell, pending.Pending, pending.Lockd)
	}
	switch r.Action {
	case api.MemberAdd:
		if at >= 0 {
			if c.Replicas[at].Pending == api.MemberAdd {
				break // resumed
			}
			return refuse(api.CodeConflict, "lockd %d already hosts a replica of cell %s: a process holds at most one replica of a cell", r.Lockd, r.Cell)
		}
		if pending != nil {
			return busy()
		}
		c.Replicas = append(c.Replicas, replica{ReplicaID: c.NextReplica, Lockd: r.Lockd, Learner: r.Learner, Joined: r.Learner, Pending: api.MemberAdd})
		c.NextReplica++
	case api.MemberPromote, api.MemberRemove:
		if at < 0 {
			return refuse(api.CodeNotFound, "lockd %d hosts no replica of cell %s", r.Lockd, r.Cell)
		}
		rep := &c.Replicas[at]
		if rep.Pending == r.Action {
			break // resumed
		}
		if pending != nil {
			return busy()
		}
		if r.Action == api.MemberPromote && !rep.Learner {
			return refuse(api.CodeConflict, "the replica of cell %s on lockd %d already votes", r.Cell, r.Lockd)
		}
		if r.Action == api.MemberRemove && !rep.Learner && voters-1 < minVoters {
			return refuse(api.CodeConflict, "removing the replica on lockd %d would leave cell %s %d voters: it keeps at least %d (add one first)", r.Lockd, r.Cell, voters-1, minVoters)
		}
		rep.Pending = r.Action
	case api.MemberDone, api.MemberAbort:
		if at < 0 || c.Replicas[at].Pending == "" {
			return Result{Cell: ptr(s.cellInfo(c))} // confirmed already
		}
		rep := &c.Replicas[at]
		switch {
		case rep.Pending == api.MemberAdd && r.Action == api.MemberAbort,
			rep.Pending == api.MemberRemove && r.Action == api.MemberDone:
			c.Replicas = append(c.Replicas[:at], c.Replicas[at+1:]...)
		case rep.Pending == api.MemberPromote && r.Action == api.MemberDone:
			rep.Learner, rep.Pending = false, ""
		default:
			rep.Pending = ""
		}
	default:
		return refuse(api.CodeBadRequest, "unknown member action %q", r.Action)
	}
	return Result{Cell: ptr(s.cellInfo(c))}
}

// restore plans a cell's rebuild from its backup: the cell gets new
// replicas (fresh ids, so no member of the lost group is ever confused
// with one of the new; all initial, all to be imported), and each of its
// prefixes epoch + 1. The restored cell's log continues from the backup's
// index, so without the raise it would issue again the tokens the lost
// cell issued after the backup. A second plan supersedes the first (its
// imports must be done again); the replicas of the old group are stopped
// by their lockds as soon as they read it.
//
// The plan, not the backup, says what the restored cell serves: exactly
// the prefixes the directory gives it now, at these raised epochs (a
// prefix of the backup that moved away since is dropped), and it counts
// the cell's restores, whose count sets the restored leader's lowest
// epoch (Directory.RestorePlan).
func (s *State) restore(r *api.RestoreCellRequest) Result {
	c, ok := s.cells[r.Cell]
	if !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if r.BackupIndex == 0 {
		return refuse(api.CodeBadRequest, "a restore names the backup it restores (its index, as lockctl backup printed it)")
	}
	if c.Restores >= api.MaxRestoresPerCell {
		return refuse(api.CodeLimitExceeded, "cell %s was restored %d times, the limit: create a new cell and move its prefixes there", r.Cell, c.Restores)
	}
	var prefixes []*api.PrefixInfo
	for _, p := range s.prefixes {
		if p.Cell == c.Name || p.Migration != nil && p.Migration.To == c.Name {
			if p.Migration != nil {
				return refuse(api.CodeConflict, "prefix %s of cell %s is migrating: finish or abort the migration first (lockctl migrate %s --abort)", p.Prefix, c.Name, p.Prefix)
			}
			if p.Epoch+1 > api.MaxTokenEpoch {
				return refuse(api.CodeTokenExhausted, "prefix %s is at epoch %d, the token limit", p.Prefix, p.Epoch)
			}
			prefixes = append(prefixes, p)
		}
	}
	voters := 0
	for _, rep := range c.Replicas {
		if !rep.Learner {
			voters++
		}
	}
	n := len(r.On)
	if n == 0 {
		n = 5
		if voters < 5 {
			n = 3
		}
	}
	if n != 3 && n != 5 {
		return refuse(api.CodeBadRequest, "a cell has 5 replicas (3 allowed), not %d", n)
	}
	on := slices.Clone(r.On)
	if len(on) > 0 {
		if err := s.checkOn(on); err != nil {
			return Result{Err: err}
		}
	} else {
		load := s.load()
		for _, rep := range c.Replicas {
			load[rep.Lockd]-- // the cell's own replicas are being replaced
		}
		var err *api.Error
		if on, err = Place(s.lockdList(), load, n); err != nil {
			return Result{Err: err}
		}
	}
	c.Replicas = nil
	for _, id := range on {
		c.Replicas = append(c.Replicas, replica{ReplicaID: c.NextReplica, Lockd: id, Initial: true, Restored: true})
		c.NextReplica++
	}
	c.RestoreIndex = r.BackupIndex
	c.Restores++
	if !brokenRestoreKeepsEpoch {
		for _, p := range prefixes {
			p.Epoch++
		}
	}
	return Result{Cell: ptr(s.cellInfo(c))}
}

func ptr[T any](v T) *T { return &v }

// checkTiming refuses a cell timing that cannot work (nil: the defaults).
func checkTiming(t *api.CellTiming) *api.Error {
	if t == nil {
		return nil
	}
	if err := t.Check(); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return ae
		}
		return api.Errorf(api.CodeBadRequest, "%v", err)
	}
	return nil
}

// cloneTiming copies a timing; all-default is stored as nil.
func cloneTiming(t *api.CellTiming) *api.CellTiming {
	if t == nil || t.IsZero() {
		return nil
	}
	c := *t
	return &c
}

func clonePrefix(p *api.PrefixInfo) *api.PrefixInfo {
	c := *p
	if p.Migration != nil {
		m := *p.Migration
		c.Migration = &m
	}
	return &c
}

func (s *State) cellInfo(c *cellRec) api.CellInfo {
	info := api.CellInfo{Name: c.Name, ShardID: c.ShardID, RestoreIndex: c.RestoreIndex, Restores: c.Restores, Timing: cloneTiming(c.Timing)}
	for _, r := range c.Replicas {
		l := s.lockds[r.Lockd]
		info.Replicas = append(info.Replicas, api.ReplicaInfo{ReplicaID: r.ReplicaID, Lockd: r.Lockd, APIAddr: l.APIAddr, Zone: l.Zone, Learner: r.Learner, Initial: r.Initial, Pending: r.Pending, JoinedLearner: r.Joined, Restored: r.Restored})
		info.Endpoints = append(info.Endpoints, l.APIAddr)
	}
	for _, p := range s.prefixes {
		if p.Cell == c.Name {
			info.Prefixes = append(info.Prefixes, p.Prefix)
		}
	}
	sort.Strings(info.Prefixes)
	return info
}

// Response is the whole directory as the API serves it, sorted.
func (s *State) Response() api.DirectoryResponse {
	d := api.DirectoryResponse{Index: s.index, Lockds: s.lockdList(), Proxies: s.proxyList(), Tenants: s.tenantList()}
	names := make([]string, 0, len(s.cells))
	for n := range s.cells {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.Cells = append(d.Cells, s.cellInfo(s.cells[n]))
	}
	for _, p := range s.prefixes {
		d.Prefixes = append(d.Prefixes, *clonePrefix(p))
	}
	sort.Slice(d.Prefixes, func(i, j int) bool { return d.Prefixes[i].Prefix < d.Prefixes[j].Prefix })
	d.Directory = api.CellInfo{Name: "directory", ShardID: directory.ShardID}
	for _, id := range s.dirLockds {
		l := s.lockds[id]
		d.Directory.Replicas = append(d.Directory.Replicas, api.ReplicaInfo{ReplicaID: id, Lockd: id, APIAddr: l.APIAddr, Zone: l.Zone, Initial: true})
		d.Directory.Endpoints = append(d.Directory.Endpoints, l.APIAddr)
	}
	return d
}

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
}

// Save writes the state.
func (s *State) Save(w io.Writer) error {
	snap := snapshot{Index: s.index, Lockds: s.lockdList(), DirLockds: s.dirLockds, NextShard: s.nextShard, Proxies: s.proxyList(), Tenants: s.tenantList()}
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
