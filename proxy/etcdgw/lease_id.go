package etcdgw

import (
	"hash/fnv"
	"math/rand/v2"
)

// Lease ids: a positive int64 with the granting gateway's 16-bit tag (a
// hash of the proxy's name) in bits 47..62 and a random part below, so
// two gateways' ids do not collide and a lease another gateway granted
// is told apart (leases live in the gateway that granted them).

const (
	leaseTagShift = 47
	leaseTagMask  = 0xffff
	leaseLowMask  = 1<<leaseTagShift - 1
	// maxIDDraws bounds the draws for a free id (a collision within one
	// credential's at most MaxLeasesPerCredential ids is rare).
	maxIDDraws = 16
)

// leaseTag is the tag of a proxy name: never 0 (ids with tag 0 are the
// small ones clients choose).
func leaseTag(name string) uint16 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	if t := uint16(h.Sum32() & leaseTagMask); t != 0 {
		return t
	}
	return 1
}

// tagOf is the tag bits of an id.
func tagOf(id int64) uint16 { return uint16(id >> leaseTagShift & leaseTagMask) }

// newLeaseID draws an id with tag; the random part is never 0.
func newLeaseID(tag uint16) int64 {
	low := int64(rand.Uint64()&leaseLowMask) | 1
	return int64(tag)<<leaseTagShift | low
}

// foreignLease reports whether id carries another gateway's tag.
func foreignLease(id int64, tag uint16) bool {
	t := tagOf(id)
	return t != 0 && t != tag
}
