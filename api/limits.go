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
	// MaxConnectionsPerLockd bounds the API connections one lockd holds
	// open at once (clients, proxies and other lockds; served, or held by
	// a parked KeepAlive); past it a new one is answered 503 and closed
	// (a TLS one is closed). Keep the process's file-descriptor limit
	// above it (the systemd unit sets 65 536); should descriptors run out
	// anyway, the lockd waits for one (internal/listen) and goes on.
	MaxConnectionsPerLockd = 50_000

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
	// MaxBatchReplyEvents bounds the events of one batch reply, over all
	// its sessions (8 × MaxPendingEvents): with MaxPathLen paths it stays
	// well under MaxReplyBody. A session whose events do not fit is
	// reported in a later reply (they stay queued until acknowledged).
	MaxBatchReplyEvents = 8 * MaxPendingEvents
	// MaxLeaderWait bounds how long a replica holds a request for a usable
	// leader (HeaderWaitLeaderMS): an election timeout is 1 to 2 s.
	MaxLeaderWait = 2500 * time.Millisecond
	// CacheWindow bounds how long after the send time of its last
	// KeepAlive the cell confirmed a client serves reads from its cache
	// (the SDK uses the smaller of this and 3/4 of its lease, less a
	// drift margin). It is a short grant that KeepAlives renew: a session
	// whose cache holds anything sends them every third of its window
	// (CacheKeepAliveWait), so the cache stays on while they flow, and a
	// new leader waits at most this long (from its start) for clients
	// that do not check in before it changes a node they may cache
	// (issue 23, finding 11: with 9 s, writes of cached nodes stalled
	// 13-33 s across chains of leader faults). A session that caches
	// nothing renews every lease/3, as before.
	CacheWindow = 1500 * time.Millisecond

	// DirectoryRefreshGap is the least time between two directory reads
	// a lockd makes for requests naming what its view lacks (an unknown
	// API token or cell): such requests share one read, so made-up
	// tokens cannot turn into a read each.
	DirectoryRefreshGap = 100 * time.Millisecond
)

// CacheWindowFor is the cache window of a session with the given lease.
func CacheWindowFor(lease time.Duration) time.Duration {
	return min(CacheWindow, lease*3/4)
}

// FairCacheAck is the least time an invalidation must leave of a cache
// grant of the given window for a grant let run out unacknowledged to be
// held against its client: half the window. An honest client
// acknowledges within a round trip, but one whose invalidation lands
// with a few milliseconds of its grant left has had no chance to. A
// leader judges its sessions' deadlines by it (session.FairAckTime), and
// a lockproxy its clients' grants.
func FairCacheAck(window time.Duration) time.Duration { return window / 2 }

// CacheKeepAliveWait is the KeepAlive long poll of a session whose cache
// holds values: a third of its cache window, so a KeepAlive confirmed
// within the window follows the last one even when a reply takes as
// long as the wait.
func CacheKeepAliveWait(lease time.Duration) time.Duration {
	return CacheWindowFor(lease) / 3
}

// Client caching on the leader (issue 22, holes 5 and 7): bounds on the
// cacher table. Past either cap a cacheable read is served uncached (not
// an error: caching is an optimisation), counted in
// lockd_cache_uncached_over_cap_total.
const (
	// MaxCachedPathsPerSession bounds the nodes one session is recorded
	// as caching on a cell. An entry costs the leader about 150 bytes (two
	// map entries), so a session at the cap holds about 1.5 MB; 10 000
	// covers a configuration or name-service working set many times over
	// (the SDK keeps at most 100 000, and serves the rest uncached too).
	MaxCachedPathsPerSession = 10_000
	// MaxCachedPathsPerTenant bounds the (node, session) entries of all
	// the sessions of one tenant on a cell (the session's tenant as the
	// state recorded it at its open; sessions without a tenant, auth off,
	// have only the per-session cap): about 40 MB of leader memory, or
	// 1 000 clients caching 250 nodes each.
	MaxCachedPathsPerTenant = 250_000
	// MaxCacheMissesPerTenant: once this many of one tenant's sessions
	// let a cache invalidation go unacknowledged past its deadline (each
	// holding up a write up to one cache window), none of the tenant's
	// sessions may cache on the cell until its next leader: a tenant
	// cannot renew the attack with a new session for every write.
	MaxCacheMissesPerTenant = 3
)

// The lockproxy's bounds (issue 22, holes 3, 4 and 6): what a client may
// make a proxy hold, how the proxy cuts its KeepAlive batches, and how
// fresh its view of the tenants is.
const (
	// SessionSecretLen is the length of a session's secret as the leader
	// draws it: 128 random bits, lower-case hex. A proxy refuses any other
	// (bad_request) before it keeps or forwards anything of the request.
	SessionSecretLen = 32
	// MaxRequestNameLen bounds a cell or proxy-instance name in a client
	// request a proxy acts on itself.
	MaxRequestNameLen = 128
	// MaxProxyBatchSessions and MaxProxyBatchBytes cut a proxy's KeepAlive
	// batch: a proxy with more sessions (or bytes) on a cell sends several
	// batches at once, each well under MaxBatchSessions and MaxBatchBody.
	MaxProxyBatchSessions = 10_000
	MaxProxyBatchBytes    = 1 << 20
	// ProxyBatchTimeout bounds one batch call beyond the leader's wait,
	// its retries included: a batch that fails is not resent as it was
	// (the next one is built afresh from the sessions then).
	ProxyBatchTimeout = 5 * time.Second
	// MaxProxyWatchesPerSession and MaxProxyWatchesPerTenant bound the
	// watches a proxy holds for clients: one per (path, kind) per client
	// session, however many times it arms it; past either, arming is
	// refused limit_exceeded. Each costs the proxy one entry (and, for
	// the first client on a path and kind, one watch on its own session).
	MaxProxyWatchesPerSession = 4096
	MaxProxyWatchesPerTenant  = 32_768
	// ProxyAuthRefresh is how often a lockproxy re-reads the directory's
	// tenants: a revoked token or a narrowed grant takes effect at a
	// proxy within this plus one directory read (the bound is 1 s + the
	// read), and the sessions of a tenant without tokens stop being
	// renewed there (they expire within a lease).
	ProxyAuthRefresh = time.Second
	// ProxyAuthMaxStale: a proxy whose view of the tenants is older than
	// this (the directory does not answer it) answers no cached read or
	// watch itself; it forwards them to the lockds, which decide.
	ProxyAuthMaxStale = 5 * time.Second
)

// Lock-delays that outlive their lock directory (issue 23, finding 8).
const (
	// MaxDeletedLockDelays bounds the lock-delays a cell keeps for lock
	// directories deleted while in lock-delay: the delay (and the
	// directory's sequence counter) stays in force, on the path, until
	// the leader ends it, so a directory made again grants nobody before
	// then. Past it, deleting one more lock directory in lock-delay is
	// refused limit_exceeded (it can be deleted once its delay ends,
	// within MaxLockDelay).
	MaxDeletedLockDelays = 10_000
)

// Fairness of the kept lock-delays (issue 23, finding 8, follow-up).
const (
	// MaxDeletedLockDelaysPerTenant bounds the kept lock-delays (see
	// MaxDeletedLockDelays) of the lock directories one tenant owns on a
	// cell, so that no tenant fills the cell's table and stops the others
	// deleting theirs: past it, that tenant's delete of one more lock
	// directory in lock-delay is refused limit_exceeded and changes
	// nothing. Delays that move in with a prefix are kept whatever their
	// tenant holds (a move is not refused per tenant; the cell's bound
	// holds).
	MaxDeletedLockDelaysPerTenant = 1_000
)

// Cells the caller's view of the directory does not name yet (issue 23,
// finding 2).
const (
	// UnknownCellWait bounds how long an SDK client (and so a lockproxy
	// and lockctl) waits for a directory read when a call names a cell
	// its view does not (one created a moment ago) before refusing it
	// wrong_cell. Such reads start DirectoryRefreshGap apart at least.
	UnknownCellWait = 3 * time.Second
)

// A change whose proposal failed without a verdict (issue 23, finding 5).
const (
	// MaxSettleAttempts bounds the barrier proposals a leader makes to
	// learn whether such a change committed; its node stays uncacheable
	// until one does (or, failing all, until the leadership ends).
	MaxSettleAttempts = 20
)

// Prefix moves (issue 23, findings 1 and 7).
const (
	// MaxMigrationDriver bounds the bytes of a migration driver's name
	// (MigrateRequest.Driver, a random nonce).
	MaxMigrationDriver = 64
	// MaxMovedLockDelay bounds a lock-delay that moved with its prefix: a
	// lock held at the seal is not granted on the new cell for its
	// holder's lease plus its lock-delay (at most MaxLease +
	// MaxLockDelay), timed from the new cell's first serving entry.
	MaxMovedLockDelay = MaxLease + MaxLockDelay
)

// Restores (issue 23, finding 4).
const (
	// LeaderEpochsPerRestore spaces the leader epochs of a cell's
	// restores: the first leader of a cell restored for the n-th time
	// starts at leader epoch n × LeaderEpochsPerRestore at least
	// (RestorePlan.LeaderEpochFloor), above every epoch the cell had
	// before (it would take 2^32 leader changes between two restores to
	// reach the next floor), so clients flush their caches, number events
	// afresh, and proxies take the new leader's events.
	LeaderEpochsPerRestore = 1 << 32
	// MaxRestoresPerCell bounds how often one cell is restored, so that
	// its leader epochs fit 64 bits.
	MaxRestoresPerCell = 1<<31 - 1
)

// Membership changes (issue 23, finding 10).
const (
	// MemberOutcomeTimeout bounds how long a lockd tries to learn whether
	// a membership change whose Raft request failed was made anyway (a
	// barrier entry, then a membership read); past it the change stays
	// pending in the directory, to be run again.
	MemberOutcomeTimeout = 5 * time.Second
)

// A restored cell's first leaderships (issue 23, finding 4).
const (
	// RestoreHeldLeaderships is how many leaderships after a restore hold
	// every change for a cache window (session.Manager.HoldAll): their
	// clients may cache under sessions the backup never had.
	RestoreHeldLeaderships = 3
)

// RestoredLeadership reports whether leader epoch is one of the first
// RestoreHeldLeaderships of a restored cell (restores start at multiples
// of LeaderEpochsPerRestore).
func RestoredLeadership(epoch uint64) bool {
	return epoch >= LeaderEpochsPerRestore && epoch%LeaderEpochsPerRestore < RestoreHeldLeaderships
}
