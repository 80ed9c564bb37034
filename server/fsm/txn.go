package fsm

// Transactions: a few writes (put, create, delete) committed in one entry
// only if every condition holds ("token T holds lock directory D", "node
// P is at version V", "P does not exist", "P exists", and etcd's compares:
// txn_cmp.go). All or nothing:
// every condition, then every write's own checks (the single write's:
// path, value, session, ACL flags, version, limits and quotas, summed
// over the writes) are checked against the state before anything
// changes; a refused transaction changes nothing and names the condition
// (FailedIf) or write (FailedThen) that failed. The writes then apply in
// order through the single writes' own code, so their changes, watches
// and cache records are exactly theirs.
//
// Each write is checked against the state before the transaction, so
// writes may not depend on one another: no two touch the same node and
// none lies under another (txnClash); sequential creates under one
// parent take consecutive numbers, as one after the other would.

import (
	"strings"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// OpTxn commits Then if every condition of If holds (txn.go). Needs log
// codec V2; V3 with a compare or a write's container or uncontain
// (TxnCodec).
const OpTxn Op = "txn"

// TxnOp is one write of a txn entry: the client's, and the caller's ACL
// flags on its path (a tenant's grants differ per path): OwnOnly and
// ParentsFrom as a single write's Command carries them.
type TxnOp struct {
	api.TxnOp
	OwnOnly     bool   `json:"own_only,omitempty"`
	ParentsFrom string `json:"parents_from,omitempty"`
}

// txnBudget is the growth of the writes checked so far: the cell's and
// the entry's tenant's (nodes and bytes), the children each existing
// node gains, and the next sequence number of each parent a sequential
// create took one under.
type txnBudget struct {
	nodes, tenantNodes int
	bytes, tenantBytes int64
	kids               map[*node]int
	nextSeq            map[string]uint64
}

// txn applies a txn entry.
func (s *State) txn(index uint64, c *Command) (Result, []Change) {
	if err := s.checkTxnEntry(c); err != nil {
		return Result{Err: err}, nil
	}
	res, changes := s.decideTxn(index, c)
	// The prefix's epoch as decided: the high bits of the transaction's
	// revision (the etcd gateway's), which a read before or after it
	// could see otherwise across a move or a restore.
	res.Epoch = s.PrefixState(api.Prefix(c.Then[0].Path)).Epoch
	return res, changes
}

// decideTxn checks the conditions, then the writes, and applies them.
func (s *State) decideTxn(index uint64, c *Command) (Result, []Change) {
	if i, err := s.checkTxnConds(c); err != nil {
		return Result{Err: err, FailedIf: i + 1}, nil
	}
	if i, err := s.checkTxnOps(index, c); err != nil {
		return Result{Err: err, FailedThen: i + 1}, nil
	}
	return s.applyTxn(index, c)
}

// checkTxnEntry checks the entry's bounds and kinds (api.CheckTxnShape),
// and that the cell serves every path (a routing refusal names no
// condition or write: it is retried elsewhere).
func (s *State) checkTxnEntry(c *Command) *api.Error {
	req := api.TxnRequest{If: c.If, Then: make([]api.TxnOp, len(c.Then))}
	for i := range c.Then {
		req.Then[i] = c.Then[i].TxnOp
	}
	if err := api.CheckTxnShape(&req); err != nil {
		return asAPIError(err)
	}
	for _, p := range req.Paths() {
		if err := s.CheckServes(p); err != nil {
			return err
		}
	}
	return nil
}

// checkTxnConds returns the first condition that does not hold.
func (s *State) checkTxnConds(c *Command) (int, *api.Error) {
	for i, k := range c.If {
		if err := s.checkTxnCond(k); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// checkTxnCond checks one condition (condition_failed if it does not
// hold).
func (s *State) checkTxnCond(k api.TxnCond) *api.Error {
	n, exists := s.nodes[k.Path]
	switch k.If {
	case api.CondHolds:
		if valid, holders := s.CheckToken(k.Path, k.Token); !valid && !mutant.On(mutant.TxnHolds) {
			return api.Errorf(api.CodeConditionFailed, "token %d does not hold lock %s (holders %v)", k.Token, k.Path, holders)
		}
	case api.CondVersion:
		if !exists {
			return api.Errorf(api.CodeConditionFailed, "%s does not exist (wanted version %d)", k.Path, k.Version)
		}
		if n.version != k.Version {
			return api.Errorf(api.CodeConditionFailed, "%s is at version %d, not %d", k.Path, n.version, k.Version)
		}
	case api.CondMissing:
		if exists {
			return api.Errorf(api.CodeConditionFailed, "%s exists", k.Path)
		}
	case api.CondExists:
		if !exists {
			return api.Errorf(api.CodeConditionFailed, "%s does not exist", k.Path)
		}
	case api.CondCreateRev, api.CondModRev, api.CondVersionCmp, api.CondValue, api.CondOwner:
		return s.checkTxnCompare(k) // txn_cmp.go
	}
	return nil
}

// checkTxnOps checks every write against the state (and the growth of
// the writes before it), changing nothing; it returns the first refused.
func (s *State) checkTxnOps(index uint64, c *Command) (int, *api.Error) {
	if i, err := txnOverlap(c.Then); err != nil {
		return i, err
	}
	b := txnBudget{kids: map[*node]int{}, nextSeq: map[string]uint64{}}
	for i := range c.Then {
		sub := txnSub(c, &c.Then[i])
		var err *api.Error
		switch sub.Op {
		case OpCreate:
			err = s.checkTxnCreate(index, &sub, &b)
		case OpPut:
			err = s.checkTxnPut(index, &sub, &b)
		case OpDelete:
			err = s.checkTxnDelete(&sub, &b)
		}
		if err != nil {
			return i, err
		}
	}
	return 0, nil
}

// txnSub is write o of c as the single write's command: c's session,
// secret, tenant, quota and admin flag, o's path, fields and ACL flags
// (no request id: the txn as a whole is deduplicated).
func txnSub(c *Command, o *TxnOp) Command {
	sub := Command{
		Path: o.Path, Value: o.Value, Version: o.Version, Ephemeral: o.Ephemeral, Sequential: o.Sequential,
		MakeParents: o.MakeParents, ParentsFrom: o.ParentsFrom, OwnOnly: o.OwnOnly,
		Container: o.Container, Uncontain: o.Uncontain,
		Tenant: c.Tenant, Quota: c.Quota, Admin: c.Admin,
	}
	sub.Session, sub.Secret = c.Session, c.Secret
	switch o.Op {
	case api.TxnCreate:
		sub.Op = OpCreate
	case api.TxnPut:
		sub.Op = OpPut
	case api.TxnDelete:
		sub.Op = OpDelete
	}
	return sub
}

// txnOverlap refuses two writes of one node, or one under another's
// (checked against the state before the transaction, the second would
// not see the first). Sequential creates of the same name under one
// parent are allowed: each takes the next number.
func txnOverlap(ops []TxnOp) (int, *api.Error) {
	for j := range ops {
		for i := 0; i < j; i++ {
			if txnClash(&ops[i].TxnOp, &ops[j].TxnOp) {
				return j, api.Errorf(api.CodeBadRequest, "write %d (%s) and write %d (%s) touch one node, or one lies under the other: a transaction writes each node once and no write depends on another", i, ops[i].Path, j, ops[j].Path)
			}
		}
	}
	return 0, nil
}

// txnClash reports whether writes a and b overlap.
func txnClash(a, b *api.TxnOp) bool {
	if seqCreate(a) && seqCreate(b) && a.Path == b.Path {
		return false
	}
	return txnCovers(a, b.Path) || txnCovers(b, a.Path)
}

func seqCreate(o *api.TxnOp) bool { return o.Op == api.TxnCreate && o.Sequential }

// txnCovers reports whether path is o's node or under it; a sequential
// create's node is its path with a suffix, so any path starting with it.
func txnCovers(o *api.TxnOp, path string) bool {
	if seqCreate(o) {
		return strings.HasPrefix(path, o.Path)
	}
	return api.Covers(o.Path, path)
}

// checkTxnCreate checks a create as a single create would (checkCreate),
// then the growth, children and sequence numbers summed with the writes
// before it.
func (s *State) checkTxnCreate(index uint64, c *Command, b *txnBudget) *api.Error {
	p, err := s.checkCreate(index, c)
	if err != nil {
		return err
	}
	if c.Sequential {
		if err := s.txnSeq(c, &p, b); err != nil {
			return err
		}
	}
	holder := p.parent
	if holder == nil { // make_parents: the nearest existing ancestor gains the child
		q := api.Parent(p.parentPath)
		for s.nodes[q] == nil {
			q = api.Parent(q)
		}
		holder = s.nodes[q]
	}
	if holder.numChildren()+b.kids[holder] >= s.limits.children {
		return api.Errorf(api.CodeLimitExceeded, "%s would have %d children, limit %d (MaxChildrenPerNode)", holder.path, holder.numChildren()+b.kids[holder]+1, s.limits.children)
	}
	nodes, bytes := 1+p.parentNodes, int64(len(p.path)+len(c.Value))+p.parentBytes
	if err := s.checkTxnGrowth(c, b, nodes, bytes, true); err != nil {
		return err
	}
	b.kids[holder]++
	b.add(nodes, bytes, true)
	return nil
}

// txnSeq numbers a sequential create after the ones before it under the
// same parent, skipping names taken, as applying them in turn would.
func (s *State) txnSeq(c *Command, p *createPlan, b *txnBudget) *api.Error {
	if next, ok := b.nextSeq[p.parentPath]; ok && next > p.seq {
		for p.seq = next; ; p.seq++ {
			if p.seq > maxSeq {
				return api.Errorf(api.CodeBadRequest, "sequence counter of %s is exhausted", p.parentPath)
			}
			p.path = c.Path + padSeq(p.seq)
			if _, taken := s.nodes[p.path]; !taken {
				break
			}
		}
	}
	b.nextSeq[p.parentPath] = p.seq + 1
	return nil
}

// padSeq is a sequence number as a node name's suffix.
func padSeq(seq uint64) string {
	const digits = "0123456789"
	var buf [seqDigits]byte
	for i := seqDigits - 1; i >= 0; i-- {
		buf[i] = digits[seq%10]
		seq /= 10
	}
	return string(buf[:])
}

// checkTxnPut checks a put as put would, with the growth summed over the
// writes before it.
func (s *State) checkTxnPut(index uint64, c *Command, b *txnBudget) *api.Error {
	if err := s.checkNodePath(c.Path); err != nil {
		return err
	}
	if err := checkValue(c.Value); err != nil {
		return err
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		if c.OwnOnly {
			return api.Errorf(api.CodeForbidden, "%s does not exist: creating it needs the write role", c.Path)
		}
		if c.Version != nil && *c.Version != 0 {
			return api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)
		}
		create := putCreate(c)
		return s.checkTxnCreate(index, &create, b)
	}
	if err := mayChange(c, n); err != nil {
		return err
	}
	if c.Version != nil && *c.Version == 0 {
		return api.Errorf(api.CodeNodeExists, "%s exists", c.Path)
	}
	if c.Version != nil && *c.Version != n.version {
		return api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)
	}
	delta := int64(len(c.Value) - len(n.value))
	if err := s.checkTxnGrowth(c, b, 0, delta, n.tenant == c.Tenant); err != nil {
		return err
	}
	b.add(0, delta, n.tenant == c.Tenant)
	return nil
}

// checkTxnDelete checks a delete as delete would. A lock directory in
// lock-delay is not deleted by a transaction (its delay would be kept,
// against a limit the writes do not sum).
func (s *State) checkTxnDelete(c *Command, b *txnBudget) *api.Error {
	if err := s.checkNodePath(c.Path); err != nil {
		return err
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		return api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)
	}
	if err := mayChange(c, n); err != nil {
		return err
	}
	if c.Version != nil && *c.Version != n.version {
		return api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)
	}
	if n.numChildren() > 0 {
		return api.Errorf(api.CodeNotEmpty, "%s has %d children", c.Path, n.numChildren())
	}
	if n.delay != nil {
		return api.Errorf(api.CodeConflict, "%s is a lock directory in lock-delay: delete it alone, or once its delay ends", c.Path)
	}
	b.add(-1, -nodeBytes(n), n.tenant == c.Tenant)
	return nil
}

// add counts a checked write's growth (negative for a delete); own: the
// node is the entry's tenant's.
func (b *txnBudget) add(nodes int, bytes int64, own bool) {
	b.nodes += nodes
	b.bytes += bytes
	if own {
		b.tenantNodes += nodes
		b.tenantBytes += bytes
	}
}

// checkTxnGrowth refuses a write whose growth, after the writes before it,
// passes the cell's limits or (own: the node is the entry's tenant's) the
// tenant's quota: exactly what applying them in turn would refuse.
func (s *State) checkTxnGrowth(c *Command, b *txnBudget, nodes int, bytes int64, own bool) *api.Error {
	if nodes > 0 && len(s.nodes)+b.nodes+nodes > s.limits.nodes {
		return api.Errorf(api.CodeLimitExceeded, "the cell would hold %d nodes, limit %d (MaxNodesPerCell)", len(s.nodes)+b.nodes+nodes, s.limits.nodes)
	}
	if bytes > 0 && s.bytes+b.bytes+bytes > s.limits.bytes {
		return api.Errorf(api.CodeLimitExceeded, "the cell would hold %d bytes of paths and values, limit %d (MaxBytesPerCell)", s.bytes+b.bytes+bytes, s.limits.bytes)
	}
	if !own || c.Tenant == "" || c.Quota == nil {
		return nil
	}
	q := c.Quota.Effective()
	_, hn, hb := s.Usage(c.Tenant)
	if nodes > 0 && hn+b.tenantNodes+nodes > q.Nodes {
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s would hold %d nodes on this cell, quota %d", c.Tenant, hn+b.tenantNodes+nodes, q.Nodes)
	}
	if bytes > 0 && hb+b.tenantBytes+bytes > q.Bytes {
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s would hold %d bytes on this cell, quota %d", c.Tenant, hb+b.tenantBytes+bytes, q.Bytes)
	}
	return nil
}

// applyTxn applies the checked writes in order, each through the single
// write's code. None is refused (checkTxnOps checked each as it will
// apply); one that were would be a bug, answered internal.
func (s *State) applyTxn(index uint64, c *Command) (Result, []Change) {
	var changes []Change
	nodes := make([]api.Node, 0, len(c.Then))
	emptied := make([]*node, 0, len(c.Then)) // the deleted nodes' parents (txnDelete)
	for i := range c.Then {
		sub := txnSub(c, &c.Then[i])
		var (
			r  Result
			ch []Change
		)
		switch sub.Op {
		case OpCreate:
			r, ch = s.create(index, &sub)
		case OpPut:
			r, ch = s.put(index, &sub)
		case OpDelete:
			r, ch = s.txnDelete(index, &sub, &emptied)
		}
		changes = append(changes, ch...)
		if r.Err != nil || r.Node == nil {
			return Result{Err: api.Errorf(api.CodeInternal, "txn write %d refused after its check: %v", i, r.Err), FailedThen: i + 1}, changes
		}
		nodes = append(nodes, *r.Node)
	}
	return Result{TxnNodes: nodes}, append(changes, s.dropTxnContainers(index, emptied)...)
}

// txnDelete is delete without its container cascade: a container a
// delete leaves empty is dropped only once every write applied
// (dropTxnContainers), if the transaction left it empty. Each write was
// checked against the state before the transaction, where the container
// exists: a later write under it (a create after its last child's
// delete) must find it, or half the transaction would apply.
func (s *State) txnDelete(index uint64, c *Command, emptied *[]*node) (Result, []Change) {
	if mutant.On(mutant.TxnContainerNow) {
		return s.delete(index, c)
	}
	if err := s.checkTxnDelete(c, &txnBudget{}); err != nil { // as checked: no lock-delay to keep
		return Result{Err: err}, nil
	}
	n := s.nodes[c.Path]
	meta := s.meta(n, false)
	*emptied = append(*emptied, n.parent)
	return Result{Node: meta}, s.removeNode(index, n)
}

// dropTxnContainers drops the containers the transaction's deletes left
// empty (and their ancestors left empty), as a delete alone does, in the
// order of the deletes; a parent already dropped is skipped.
func (s *State) dropTxnContainers(index uint64, emptied []*node) []Change {
	var changes []Change
	for _, p := range emptied {
		if s.nodes[p.path] == p {
			changes = append(changes, s.dropEmptyContainers(index, p)...)
		}
	}
	return changes
}
