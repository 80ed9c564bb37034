package etcdgw

import "github.com/lockservice/lockd/api"

// Revisions. An etcd revision here is a cell's Raft index with the
// prefix's directory epoch in the high bits, as a fencing token is
// (api.MakeToken): within a prefix it only rises, across leader changes,
// restarts and moves (a move raises the epoch), and a lock's create
// revision is its fencing token. The top bit stays clear, so a revision
// is a positive int64 as etcd's are. Revisions of two prefixes are not
// comparable: a request touches one prefix.

// rev is the revision of index under epoch.
func rev(epoch, index uint64) int64 {
	if index == 0 {
		return 0 // etcd's "no such revision" (a missing key's create/mod)
	}
	return int64(api.MakeToken(epoch, index))
}

// unrev splits a revision into its epoch and index (0, 0 for r <= 0).
func unrev(r int64) (epoch, index uint64) {
	if r <= 0 {
		return 0, 0
	}
	return api.TokenEpoch(uint64(r)), api.TokenIndex(uint64(r))
}
