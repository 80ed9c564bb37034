package api

import "time"

// Named limits. Every bound in the service is one of these.
const (
	MaxValueSize   = 64 << 10 // bytes in a node's value
	MaxPathLen     = 1024     // bytes in a path
	MaxPathDepth   = 32       // segments in a path
	MaxRequestBody = 256 << 10
	// MaxBatchBody bounds a KeepAlive batch's body (MaxBatchSessions ids and ages).
	MaxBatchBody      = 8 << 20
	MaxWatchesPerCall = 1024 // watch registrations in one /v1/watch call
	MaxNonceLen       = 64   // bytes in a session open's nonce
	MaxSecretLen      = 64   // bytes in a session's secret
	MaxTenantTokens   = 16   // live API tokens of one tenant

	// What no tenant may exceed on one cell, enforced by the state
	// machine before anything changes (deterministically: every replica
	// refuses the same entry): a request past one fails limit_exceeded
	// and applies nothing. Together they keep a cell's state well under
	// the 1 GB the design allows.
	MaxSessionsPerCell = 100_000
	MaxNodesPerCell    = 2_000_000
	MaxChildrenPerNode = 100_000
	MaxBytesPerCell    = 512 << 20 // bytes of paths and values
	// MaxWatchesPerSession bounds the watches one session has armed at the
	// leader (a lockproxy's own session holds one per path for all its
	// clients; past it, the proxy arms its clients' watches on their own
	// sessions). A lock's own waits are never refused.
	MaxWatchesPerSession = 100_000
	// MaxConnectionsPerProxy bounds the client connections one lockproxy
	// serves at once; past it a new connection is answered 503 and
	// closed (its client tries another proxy).
	MaxConnectionsPerProxy = 100_000

	// MaxLockDelay bounds a lock node's lock-delay: after its holder's
	// session ends while holding, nobody is granted the lock for that long
	// (Chubby's bound). The default is 0, no delay.
	MaxLockDelay = time.Minute

	// MaxOpenNonces is how many recent session opens a cell remembers by
	// nonce, so that a retried open returns the session the first attempt
	// opened instead of a second one.
	MaxOpenNonces = 4096

	// MaxSessionRequestWindow is how many recent request results a session keeps
	// for dedupe. A client has at most this many writes in flight per session.
	MaxSessionRequestWindow = 256

	// MaxPendingEvents bounds a session's undelivered events on the leader; past
	// it the oldest are dropped and the session is told to re-sync (EventResync).
	MaxPendingEvents = 4096

	DefaultLease     = 12 * time.Second
	MinLease         = 1 * time.Second
	MaxLease         = 5 * time.Minute
	DefaultGrace     = 45 * time.Second
	MaxKeepAliveWait = 30 * time.Second
	// MaxBatchWait bounds how long the leader holds a KeepAlive batch.
	MaxBatchWait = 2 * time.Second
	// MaxBatchSessions bounds the sessions of one KeepAlive batch (a
	// lockproxy with more sends several).
	MaxBatchSessions = 200_000
	// MaxLeaderWait bounds how long a replica holds a request for a usable
	// leader (HeaderWaitLeaderMS): an election timeout is 1 to 2 s.
	MaxLeaderWait = 2500 * time.Millisecond
	// CacheWindow bounds how long after the send time of its last
	// KeepAlive the cell confirmed a client serves reads from its cache
	// (the SDK uses the smaller of this and 3/4 of its lease, less a
	// drift margin). A KeepAlive is confirmed every lease/3, so the cache
	// stays on while they flow; a new leader waits at most this long for
	// clients that do not check in before it changes a cacheable node.
	CacheWindow = 9 * time.Second
)

// CacheWindowFor is the cache window of a session with the given lease.
func CacheWindowFor(lease time.Duration) time.Duration {
	return min(CacheWindow, lease*3/4)
}
