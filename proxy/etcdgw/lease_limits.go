package etcdgw

import "time"

// Bounds of leases and locks (docs/etcd.md, "Lease", "Lock"). Over a
// bound a request is refused ResourceExhausted naming it.
const (
	// MaxLeases bounds the leases one gateway holds, every credential's.
	MaxLeases = 100_000
	// MaxLeasesPerCredential bounds one credential's leases, so one
	// tenant cannot take every lease of the gateway.
	MaxLeasesPerCredential = 10_000
	// MaxSessionsPerLease bounds the cells one lease has keys on (one
	// session per cell, each renewed by every KeepAlive).
	MaxSessionsPerLease = 16
	// MaxKeepAliveStreams bounds the open LeaseKeepAlive streams of the
	// gateway.
	MaxKeepAliveStreams = 4096
	// MaxKeepAliveStreamsPerTenant bounds one tenant's open
	// LeaseKeepAlive streams (an etcd client opens one), so that one
	// tenant cannot hold all MaxKeepAliveStreams and leave the others'
	// leases unrenewed (attack review, session 34).
	MaxKeepAliveStreamsPerTenant = 256
	// MaxLockWaiters bounds one tenant's Lock calls waiting at once at
	// this gateway: a tenant filling it refuses its own Locks only.
	MaxLockWaiters = 1024
	// MaxLockWaitRounds bounds the wake-ups of one Lock (each: a
	// predecessor gone, or a lock-delay poll) before it answers
	// Unavailable; far above any queue a lock holds (api.MaxLockQueue).
	MaxLockWaitRounds = 1 << 20
	// MaxLeaseKeysPages bounds the range reads LeaseTimeToLive(keys)
	// makes per prefix a lease has keys on (api.MaxRangeKeys each).
	MaxLeaseKeysPages = 4
	// MaxLeasePrefixes bounds the prefixes one lease's session on a cell
	// records (a cell serves few prefixes; its keys are read per prefix).
	MaxLeasePrefixes = 16
	// maxOpenAttempts bounds the tries of one session open whose outcome
	// was unknown (the same nonce: the cell answers the first's session).
	maxOpenAttempts = 3
	// maxReapPerTick bounds the expired leases one reaper tick closes.
	maxReapPerTick = 64
	// reapInterval is how often the reaper looks for expired leases.
	reapInterval = 250 * time.Millisecond
	// leaseCallTimeout bounds one call the lease table makes to the
	// proxy (open, KeepAlive, close, range).
	leaseCallTimeout = 5 * time.Second
	// lockPollInterval is how often a Lock in lock-delay re-checks.
	lockPollInterval = 100 * time.Millisecond
	// lockCleanupTimeout bounds deleting the lock node of a Lock whose
	// caller went away.
	lockCleanupTimeout = 5 * time.Second
)
