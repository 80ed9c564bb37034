package fsm

// Transaction compares: etcd's Compare (create_rev, mod_rev, version_cmp,
// value, owner with =, !=, <, >), evaluated in the txn apply against the
// state before the transaction's writes, as the other conditions are.
//
// The rules are etcd's. A missing node's create and mod revisions,
// version and owner are 0; a value compare on a missing node never
// holds, whatever its operator. A container (a directory the cell made
// for its children, container.go) is not a key: it compares as missing,
// as the etcd gateway's ranges skip it. A revision is a token
// (api.MakeToken): the index with the node's prefix's directory epoch in
// the high bits, the epoch the cell makes lock tokens with (nodes.go),
// so a revision read before a prefix move (lower epoch) compares below
// every one after it. A value compares bytes (bytes.Compare). Owner is
// the owning session of an ephemeral node, 0 for a persistent one.

import (
	"bytes"
	"cmp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// checkTxnCompare checks one compare (condition_failed if it does not
// hold).
func (s *State) checkTxnCompare(k api.TxnCond) *api.Error {
	n := s.nodes[k.Path]
	if n != nil && n.container {
		n = nil // not a key
	}
	if k.If == api.CondValue {
		return checkValueCompare(n, k)
	}
	var have, want uint64
	switch k.If {
	case api.CondCreateRev, api.CondModRev:
		have, want = s.revision(n, k.If == api.CondModRev), k.Rev
	case api.CondVersionCmp:
		have, want = cmpVersion(n), k.Version
	case api.CondOwner:
		have, want = cmpOwner(n), k.Owner
	}
	order := cmp.Compare(have, want)
	if k.If == api.CondCreateRev || k.If == api.CondModRev {
		order = compareRev(have, want)
	}
	if cmpHolds(k.Cmp, order) {
		return nil
	}
	return api.Errorf(api.CodeConditionFailed, "%s of %s is %d: not %s %d", k.If, k.Path, have, k.Cmp, want)
}

// checkValueCompare checks a value compare of n (nil: missing, which
// never holds).
func checkValueCompare(n *node, k api.TxnCond) *api.Error {
	if n == nil && !mutant.On(mutant.TxnValueMissing) {
		return api.Errorf(api.CodeConditionFailed, "%s does not exist: a value compare on a missing key never holds", k.Path)
	}
	v := ""
	if n != nil {
		v = n.value
	}
	if cmpHolds(k.Cmp, bytes.Compare([]byte(v), k.Value)) {
		return nil
	}
	return api.Errorf(api.CodeConditionFailed, "the value of %s (%d bytes) is not %s the compare's (%d bytes)", k.Path, len(v), k.Cmp, len(k.Value))
}

// cmpVersion and cmpOwner are n's version and owning session, 0 for a
// missing node (etcd's rule).
func cmpVersion(n *node) uint64 {
	if n == nil {
		return 0
	}
	return n.version
}

func cmpOwner(n *node) uint64 {
	if n == nil {
		return 0
	}
	return n.owner
}

// cmpHolds reports whether op holds of an order (-1, 0, 1: the node's
// against the compare's). An unknown operator never holds (CheckTxnShape
// refused it before).
func cmpHolds(op api.TxnCmp, order int) bool {
	switch op {
	case api.CmpEqual:
		return order == 0
	case api.CmpNotEqual:
		return order != 0
	case api.CmpLess:
		return order < 0
	case api.CmpGreater:
		return order > 0
	}
	return false
}

// revision is n's create revision (mod: its mod revision) as a token
// under its prefix's directory epoch; 0 for a missing node.
func (s *State) revision(n *node, mod bool) uint64 {
	if n == nil {
		return 0
	}
	index := n.createIndex
	if mod {
		index = n.modifyIndex
	}
	epoch := uint64(0)
	if root := s.nodes[api.Prefix(n.path)]; root != nil {
		epoch = root.dirEpoch
	}
	return api.MakeToken(epoch, index)
}

// compareRev orders a node's revision against a compare's: as tokens
// (the epoch first, then the index).
func compareRev(have, want uint64) int {
	if mutant.On(mutant.TxnRevEpoch) {
		return cmp.Compare(api.TokenIndex(have), api.TokenIndex(want))
	}
	return cmp.Compare(have, want)
}
