package etcdgw

import (
	"time"

	"github.com/lockservice/lockd/api"
)

// TTL arithmetic, pure: what a lease may be answered, counted
// conservatively so the gateway never tells a client more time than
// every one of the lease's sessions is guaranteed at its cell.

// driftMargin is the clock-rate margin taken off a lease: lease/50, the
// SDK's rule (sdk.DriftMargin; copied here: etcdgw does not import sdk).
func driftMargin(lease time.Duration) time.Duration { return lease / 50 }

// clampTTL is a requested TTL (seconds; <= 0 takes the least) within
// [api.MinLease, api.MaxLease], in whole seconds.
func clampTTL(seconds int64) int64 {
	lo, hi := int64(api.MinLease/time.Second), int64(api.MaxLease/time.Second)
	return min(max(seconds, lo), hi)
}

// sessionUntil is how long a session is guaranteed at its cell after a
// renewal confirmed it: the call was sent at sent, the cell (or the
// proxy's batch) renewed a lease of leaseMS at least ageMS before the
// request reached it, so no earlier than sent - age; less the drift.
func sessionUntil(sent time.Time, leaseMS, ageMS int64) time.Time {
	lease := time.Duration(leaseMS) * time.Millisecond
	age := time.Duration(max(ageMS, 0)) * time.Millisecond
	return sent.Add(lease - age - driftMargin(lease))
}

// ttlLeft is the TTL (whole seconds, rounded down) to answer for a lease
// guaranteed until until: at least 1 while it lives (until after now),
// 0 once it may have ended.
func ttlLeft(until, now time.Time) int64 {
	if !until.After(now) {
		return 0
	}
	return max(int64(until.Sub(now)/time.Second), 1)
}
