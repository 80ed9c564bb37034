// Package mutant holds the deliberately broken builds of the service
// ("mutants"): each constant below names one safety rule that a test
// must prove by failing when the rule is broken. The code keeping the rule
// asks On(mutant.X) and does the broken thing when it says true.
//
// In every production build On is the constant false (off.go): the
// compiler drops the broken paths and no environment can switch one on.
// Built with -tags lockd_mutants (on.go), a process reads LOCKD_MUTANT once at
// start: a mutant name, or several joined by commas; an unknown name stops
// the process. mutants.tsv holds one row per constant naming the package
// and tests that must fail with it on, and `make mutants`
// (scripts/mutants.sh) runs every row. A new safety check adds its
// constant here and its row there (TestEveryMutantHasOneRow).
package mutant

import (
	"fmt"
	"strings"
)

// Mutant names one deliberately broken build; its value is what
// LOCKD_MUTANT and mutants.tsv's first column carry.
type Mutant string

// Env is the environment variable selecting the mutants of a process
// built with -tags lockd_mutants.
const Env = "LOCKD_MUTANT"

// The mutants, grouped by the package whose code they break. Each names
// the tests that must fail with it on (its mutants.tsv row).
const (
	// --- server/fsm (the cell's state machine) ---

	// AbortDelay makes an aborted move's unseal start no lock-delays on
	// the old cell for locks held at the seal: granted again at once.
	// Caught by server/fsm TestAbortedMoveStartsDelays (also
	// tests/integration TestAbortedMoveKeepsLocksDelayed).
	AbortDelay Mutant = "lockd_broken_abortdelay"
	// CheckAnyGranted makes the token check answer valid for any token up
	// to the current holder's (a killed holder's token passes). Caught by
	// tests/integration TestLockDelayAndTokenCheck.
	CheckAnyGranted Mutant = "lockd_broken_check"
	// CodecDropsField makes the binary log codec drop a lock create's
	// LockDelayMS: the entry applies on every replica without its
	// lock-delay. Caught by server/fsm TestCodecRoundTrip (also
	// TestOldLogReplays).
	CodecDropsField Mutant = "lockd_broken_codecfield"
	// TxnHolds makes a transaction's "token holds the lock" condition
	// always pass: a holder whose lock expired still writes through
	// Mutex.Guard. Caught by server/fsm TestTxnTranscript (also
	// tests/chaos TestChaosBrokenGuard).
	TxnHolds Mutant = "lockd_broken_txnholds"
	// TxnContainerNow makes a transaction's delete drop the container it
	// empties at once: a later write of the same transaction under it
	// finds no parent after the delete applied (half a transaction).
	// Caught by server/fsm TestAttackTxnContainerEmptied.
	TxnContainerNow Mutant = "lockd_broken_txn_container_now"
	// PermitOffByOne lets a semaphore's permit hold with N permits ahead
	// of it: N+1 holders. Caught by server/fsm TestTranscripts/semaphore
	// (also tests/chaos TestChaosBrokenSemaphore).
	PermitOffByOne Mutant = "lockd_broken_permits"
	// PermitsMixed skips the check that a permit's create names its
	// semaphore's N and lock kind: clients of different N mix in one
	// directory. Caught by server/fsm TestTranscripts/semaphore.
	PermitsMixed Mutant = "lockd_broken_permits_mixed"
	// RWDowngradeUnheld lets a lock node that does not hold downgrade:
	// a waiting writer jumps to shared. Caught by server/fsm
	// TestLockModeRefusals.
	RWDowngradeUnheld Mutant = "lockd_broken_rw_downgrade_unheld"
	// RWModeAnySession lets any session change another's lock node's
	// mode. Caught by server/fsm TestLockModeRefusals.
	RWModeAnySession Mutant = "lockd_broken_rw_mode_any_session"
	// RWUpgradeKeepsAll lets every shared node behind an upgraded one
	// hold, those created after the upgrade too: readers and the writer
	// hold together. Caught by server/fsm TestUpgradeQueuesLaterReaders
	// (also TestRWLockRandom, by its invariants).
	RWUpgradeKeepsAll Mutant = "lockd_broken_rw_upgrade_keeps_all"
	// RWUpgradeNewToken gives an upgraded writer a new token, the
	// upgrade entry's index: above the writers queued behind it, which
	// are granted after it with their lower create indexes. Caught by
	// server/fsm TestUpgradeTokenOrder.
	RWUpgradeNewToken Mutant = "lockd_broken_rw_upgrade_new_token"
	// RWSecondUpgradable lets a second upgradable node into a
	// directory: two upgrades wait for each other. Caught by server/fsm
	// TestSecondUpgradableRefused.
	RWSecondUpgradable Mutant = "lockd_broken_rw_second_upgradable"
	// ContainerSeqFromZero starts a container's sequence counter at 0:
	// one deleted and made again hands out w-0000000000 again. Caught by
	// server/fsm TestContainerRecreateNeverReusesSeq.
	ContainerSeqFromZero Mutant = "lockd_broken_container_seq_from_zero"
	// ContainerIgnoresDelay deletes an empty container in lock-delay.
	// Caught by server/fsm TestContainerKeptThroughLockDelay.
	ContainerIgnoresDelay Mutant = "lockd_broken_container_ignores_delay"
	// DirDelay drops a lock directory's lock-delay and sequence counter
	// when the empty directory is deleted. Caught by server/fsm
	// TestLockDelayOutlivesItsDirectory (also tests/integration
	// TestLockDelaySurvivesDirectoryDelete).
	DirDelay Mutant = "lockd_broken_dirdelay"
	// EphDelay lets an ephemeral node made at a deleted lock directory's
	// path take the delay and counter kept for it, and drop both when it
	// goes. Caught by server/fsm TestKeptDelayOutlivesEphemeralAtItsPath
	// (also tests/integration TestKeptDelayOutlivesEphemeralNode).
	EphDelay Mutant = "lockd_broken_ephdelay"
	// ExportOwner drops node owners from a prefix's export (tenant quotas
	// lost after a move). Caught by server/fsm TestMoveKeepsOwners (also
	// tests/integration TestHostileCredentials).
	ExportOwner Mutant = "lockd_broken_exportowner"
	// KeptFair drops the per-tenant bound on the lock-delays kept for
	// deleted lock directories. Caught by server/fsm
	// TestDeletedLockDelaysPerTenant.
	KeptFair Mutant = "lockd_broken_keptfair"
	// LossyExport makes a prefix's export silently drop one leaf in
	// lossyExportEvery (a move loses acknowledged writes unless the copy
	// digest refuses it). Caught by server/fsm TestMoveCopiesPersistentNodes
	// (with CopyDigest too, the fault suite's checker m2).
	LossyExport Mutant = "lockd_broken_lossyexport"
	// MoveDelay makes a move carry no lock-delays for locks held at the
	// seal, nor the kept delays of deleted lock directories. Caught by
	// server/fsm TestMoveCarriesLockDelays and TestMoveCarriesKeptDelays
	// (also tests/integration TestMoveKeepsLocksDelayed).
	MoveDelay Mutant = "lockd_broken_movedelay"
	// MoveKeepsEpoch makes every token carry directory epoch 1, not its
	// prefix's: tokens go down after a move. Caught by server/fsm
	// TestLockTokenDirectoryEpoch.
	MoveKeepsEpoch Mutant = "lockd_broken_move_epoch"
	// NonceKey remembers session-open nonces across tenants. Caught by
	// server/fsm TestOpenNonceIsPerTenant (also tests/integration
	// TestHostileCredentials).
	NonceKey Mutant = "lockd_broken_noncekey"
	// ParentsFrom lets make_parents create ancestors outside the caller's
	// grant. Caught by server/fsm TestMakeParentsStaysInGrant (also
	// tests/integration TestHostileCredentials).
	ParentsFrom Mutant = "lockd_broken_parentsfrom"
	// RestoreKeepsLeaderEpoch makes the first leader_start after a restore
	// ignore the plan's leader-epoch floor. Caught by server/fsm
	// TestRestoreStart.
	RestoreKeepsLeaderEpoch Mutant = "lockd_broken_restore_leaderepoch"
	// RestoreKeepsPrefixes makes a restore keep the prefixes the directory
	// moved to another cell since the backup. Caught by server/fsm
	// TestRestoreStart.
	RestoreKeepsPrefixes Mutant = "lockd_broken_restoreprefixes"
	// SealKeepsEphemerals makes a seal leave the prefix's ephemeral (lock)
	// nodes in place and fire no watch. Caught by server/fsm
	// TestSealRefusesEverythingUnderThePrefix.
	SealKeepsEphemerals Mutant = "lockd_broken_seal"
	// Secret makes the state machine take any session secret. Caught by
	// server/fsm TestSessionSecret (also tests/integration
	// TestTenantsACLsAndQuotas).
	Secret Mutant = "lockd_broken_secret"
	// StageGen makes a new cell take stage pages of any driver generation.
	// Caught by server/fsm TestMoveCopiesPersistentNodes (also
	// tests/integration TestMigrationLatePageRefused).
	StageGen Mutant = "lockd_broken_stagegen"

	// --- server/dirfsm (the directory's state machine) ---

	// CopyDigest makes a migration commit skip the copy's count and digest
	// check. Caught by server/dirfsm TestMigrationOneDriver.
	CopyDigest Mutant = "lockd_broken_copydigest"
	// MigrationDriver lets any client drive a migration in flight (a
	// second begin resumes it). Caught by server/dirfsm
	// TestMigrationOneDriver.
	MigrationDriver Mutant = "lockd_broken_migrationdriver"
	// RestoreKeepsEpoch makes a restore plan leave the cell's prefix
	// epochs unchanged. Caught by server/dirfsm TestRestorePlan.
	RestoreKeepsEpoch Mutant = "lockd_broken_restore_epoch"
	// CodecFloorIgnored registers a lockd that decodes less than the
	// cluster's log codec floor (a build that cannot read the cells'
	// entries rejoins them). Caught by server/dirfsm TestCodecFloor (also
	// tests/integration TestCodecUpgrade).
	CodecFloorIgnored Mutant = "lockd_broken_codecfloor"

	// --- server/cell (leadership, caches, lock-delays, watches) ---

	// CodecUngated makes a cell encode its entries in the newest log codec
	// whatever its state's codec: binary entries reach replicas of a build
	// that cannot read them. Caught by server/cell TestProposerEncodesInStateCodec
	// (also tests/integration TestCodecUpgrade).
	CodecUngated Mutant = "lockd_broken_codecgate"

	// SkipsInvalidation commits a change without invalidating its cachers
	// (a stale cached read after a write). Caught by tests/integration
	// TestCachedReadsInvalidatedBeforeAWrite (also tests/chaos
	// TestChaosBrokenMoves, checker c').
	SkipsInvalidation Mutant = "lockd_broken_cache"
	// SkipsFence lets a new leader change cached nodes without the
	// per-node fence (a stale value read). Caught by tests/integration
	// TestFenceHoldsOnlyWhatASilentCacherHolds.
	SkipsFence Mutant = "lockd_broken_cache_fence"
	// UnrecordedGrant commits a cache grant without its node: a new leader
	// fences the whole cell. Caught by tests/integration
	// TestFenceHoldsOnlyWhatASilentCacherHolds.
	UnrecordedGrant Mutant = "lockd_broken_cachegrant"
	// SkipsParent lets a create leave its parent's cachers uninvalidated
	// (a stale num_children). Caught by tests/integration
	// TestCachedParentSeesItsChildren.
	SkipsParent Mutant = "lockd_broken_cacheparent"
	// CachesParents grants nodes with children to caches (a stale
	// num_children after a delete). Caught by tests/integration
	// TestCachedParentSeesItsChildren.
	CachesParents Mutant = "lockd_broken_cacheparents"
	// CacheSettle makes a change with an unknown outcome leave its node
	// cacheable again at once. Caught by server/cell
	// TestUnknownOutcomeKeepsTheNodeUncacheable.
	CacheSettle Mutant = "lockd_broken_cachesettle"
	// CacheWindow ignores an invalidation's deadline: a cacher that renews
	// but never acknowledges blocks writes. Caught by tests/integration
	// TestHostileCacherCannotBlockWrites (also tests/chaos
	// TestChaosBrokenCacheWindow, checker h3).
	CacheWindow Mutant = "lockd_broken_cachewindow"
	// DeclaredWindow grants cacheable reads to clients declaring no cache
	// window, or one longer than the session's. Caught by
	// tests/integration TestUndeclaredCacheWindowServedUncached.
	DeclaredWindow Mutant = "lockd_broken_declaredwindow"
	// FenceCachers grants cacheable reads inside a new leader's fence (of
	// a node another session may serve from an earlier grant, or to a
	// reader that may): the node's next write waits the fence plus a
	// window for a silent reader, and the reader's committed record of
	// its earlier grants is replaced. Caught by server/cell
	// TestNoCacheGrantsInsideTheFence.
	FenceCachers Mutant = "lockd_broken_fencecachers"
	// LockDelayLostOnFailover makes a new leader end the lock-delays it
	// inherits at once. Caught by tests/integration
	// TestLockDelayAndTokenCheck.
	LockDelayLostOnFailover Mutant = "lockd_broken_lockdelay"
	// WatchQuota holds a tenant's watch quota per session only. Caught by
	// tests/integration TestHostileCredentials
	// (watch_quota_across_sessions).
	WatchQuota Mutant = "lockd_broken_watchquota"

	// --- server/cachers, server/session, server/raftnet ---

	// TenantMisses refuses cachers per session only, not per tenant (a
	// new session per stall). Caught by tests/integration
	// TestHostileCacherCannotBlockWrites.
	TenantMisses Mutant = "lockd_broken_tenantmisses"
	// EarlyExpiry makes the leader expire sessions half a lease early.
	// Caught by server/session TestFailoverGivesFullLease (also
	// tests/chaos TestChaosBrokenMoves, checker m3).
	EarlyExpiry Mutant = "lockd_broken_earlyexpiry"
	// FairDeadline holds every passed invalidation deadline against the
	// session, even one that left its client no time to answer. Caught by
	// server/session TestInvalidationDeadline.
	FairDeadline Mutant = "lockd_broken_fairdeadline"
	// RenewExpiring makes KeepAlive renew a lease whose expiry is in
	// flight. Caught by server/session TestLeaseLifecycle.
	RenewExpiring Mutant = "lockd_broken_renewexpiring"
	// HandOverRenews lets the leader renew leases while a planned
	// hand-over holds them: a lease renewed after its silence was
	// measured is cut short by the next leader. Caught by server/session
	// TestHandOverHoldsRenewals.
	HandOverRenews Mutant = "lockd_broken_handover_renews"
	// HandOverStaleCharge has leader_start charge the time since a
	// hand_over other than the state's (an earlier one, measured longer).
	// Caught by server/fsm TestHandOverCharge.
	HandOverStaleCharge Mutant = "lockd_broken_handover_stale_charge"
	// HandOverUncancelled thaws the leader after a hand-over that did not
	// happen without committing its cancel: a later leader charges the
	// silences of sessions renewed since. Caught by server/cell
	// TestHandOverCancelsBeforeThaw.
	HandOverUncancelled Mutant = "lockd_broken_handover_uncancelled"
	// HandOverSkipped makes a planned hand-over a plain transfer: the next
	// leader gives every session a full lease from its start. Caught by
	// tests/integration TestHandOverPassesSilence.
	HandOverSkipped Mutant = "lockd_broken_handover_skipped"
	// ReelectedUnsaid has a replica holding a request for a usable leader
	// keep it while the leader the client could not reach is re-elected
	// at a newer term (a process restarted at its address), and name it
	// without Elected: the client goes round the other replicas, each
	// holding it half its attempt. Caught by server/cell
	// TestWaitUsableNamesAReelectedLeader.
	ReelectedUnsaid Mutant = "lockd_broken_reelected_unsaid"
	// LoseEvents makes the leader lose every eighth event it queues for a
	// session (never sent, so never re-sent): a lock waiter then holds only
	// when its silence re-list finds the lock, up to a lease after the
	// release. Caught by tests/integration TestScenario3.
	LoseEvents Mutant = "lockd_broken_loseevents"
	// RestoreNoHold makes a restored cell's first leader hold nothing
	// (HoldAll a no-op). Caught by server/session
	// TestRestoredLeaderHoldsEverything.
	RestoreNoHold Mutant = "lockd_broken_restorehold"
	// ProposalOutlivesLeader keeps a proposal waiting after its leader
	// lost the leadership (until its deadline: a minute for a move's
	// copy page). Caught by tests/integration
	// TestProposalEndsWithItsLeadership and server/cell
	// TestProposalBoundToItsLeadership.
	ProposalOutlivesLeader Mutant = "lockd_broken_proposal_outlives_leader"
	// StaleConn makes the Raft sender write on a connection its restarted
	// peer closed (the message is lost). Caught by server/raftnet
	// TestFirstMessageAfterPeerRestartArrives.
	StaleConn Mutant = "lockd_broken_staleconn"
	// RefusedRedial makes the Raft sender dial again, before every
	// send, a peer that refused this node's certificate: each send
	// "succeeds" after a fresh handshake and dragonboat never learns of
	// the failure. Caught by server/raftnet
	// TestAttackRejectedClientCertIsSilentRedialStorm.
	RefusedRedial Mutant = "lockd_broken_refused_redial"

	// --- server/httpapi (a lockd's API) ---

	// ACL grants every authenticated tenant every role. Caught by
	// tests/integration TestTenantsACLsAndQuotas.
	ACL Mutant = "lockd_broken_acl"
	// BodyLimit takes batch-sized bodies from anyone and reads bodies on
	// bodyless routes. Caught by tests/integration TestHostileCredentials
	// (bodies).
	BodyLimit Mutant = "lockd_broken_bodylimit"
	// FreeGrants leaves cache grants (committed entries) unmetered by the
	// reader's write quota. Caught by tests/integration
	// TestCacheGrantsAreMeteredWrites.
	FreeGrants Mutant = "lockd_broken_freegrants"
	// NoHostHint answers wrong_cell for a cell not hosted here naming no
	// replica that hosts it. Caught by tests/integration
	// TestNotHostedCellNamesAReplica.
	NoHostHint Mutant = "lockd_broken_nohosthint"
	// ViewBehind answers wrong_cell (final) for a cell this lockd's view
	// does not list even when the client routed by a later directory (a
	// cell created a moment ago). Caught by server/httpapi
	// TestUnknownCellBehindTheClient and TestWatchCellBehindTheClient
	// (also tests/integration TestNotHostedCellNamesAReplica).
	ViewBehind Mutant = "lockd_broken_viewbehind"
	// TimeoutNotApplied marks a timed-out proposal (which may still
	// commit) not applied, so a write without a request id is sent again
	// and may apply twice. Caught by server/cell TestRaftErrorCodes.
	TimeoutNotApplied Mutant = "lockd_broken_timeout_notapplied"
	// MoveAgeSeen dates a move from when this lockd first saw it, not
	// from its begin: a lockd restarted under a stuck move reports it
	// young. Caught by server/lockd TestMoveAgeFromItsBegin.
	MoveAgeSeen Mutant = "lockd_broken_moveageseen"
	// RefreshGap lets directory reads for unknown tokens run back to back.
	// Caught by server/httpapi TestRefresherCoalesces.
	RefreshGap Mutant = "lockd_broken_refreshgap"
	// RenewCheck renews the sessions of a revoked tenant. Caught by
	// tests/integration TestHostileCredentials (renewals).
	RenewCheck Mutant = "lockd_broken_renewcheck"
	// RouteLabel labels metrics with the raw request path. Caught by
	// tests/integration TestHostileCredentials (metrics_labels).
	RouteLabel Mutant = "lockd_broken_routelabel"
	// ClientCerts serves API clients presenting no certificate. Caught by
	// tests/integration TestMutualTLS.
	ClientCerts Mutant = "lockd_broken_tls"

	// --- server/lockd (the process: placement, membership, listeners) ---

	// DirViewRead answers GET /v1/directory on a lockd without a directory
	// replica from its lagging view. Caught by tests/integration
	// TestMigrateToANewCellAtOnce.
	DirViewRead Mutant = "lockd_broken_dirviewread"
	// FDExhaust serves the API on the bare listener: a lockd exits when
	// file descriptors run out. Caught by tests/integration
	// TestIdleConnectionsCannotStopALockd.
	FDExhaust Mutant = "lockd_broken_fdexhaust"
	// MemberNoBarrier reads a failed membership change's outcome without
	// a barrier: a change in flight is recorded aborted. Caught by
	// server/lockd TestMemberVerdict.
	MemberNoBarrier Mutant = "lockd_broken_memberbarrier"
	// RaftCA runs Raft on the API's certificate and CA instead of the Raft
	// files. Caught by server/lockd TestValidateRaftTLS (also
	// tests/integration TestRaftPortTakesOnlyRaftCerts).
	RaftCA Mutant = "lockd_broken_raftca"
	// SkipsUnloadWait starts a replica's next incarnation without waiting
	// for the stopped one to unload (dragonboat panics if an engine worker
	// still holds it). Caught by server/lockd
	// TestNextReplicaWaitsForTheUnload (tests/integration
	// TestReAddReplicaOnSameLockd does not meet the race).
	SkipsUnloadWait Mutant = "lockd_broken_unload"

	// --- proxy (lockproxy) ---
	// ProxyEventCap lets a proxy hold a session's leader events for its
	// client without bound (no resync past MaxPendingEvents). Caught by
	// proxy TestLeaderEventsCappedWithResync.
	ProxyEventCap Mutant = "lockproxy_broken_eventcap"

	// ProxyACL lets the proxy's shared cache serve any token (role check
	// skipped). Caught by proxy TestAuthDecisions.
	ProxyACL Mutant = "lockproxy_broken_acl"
	// AwaitBatch answers a KeepAlive before a batch carrying it is
	// confirmed. Caught by tests/integration TestProxyKillKeepsLocks
	// (timing-dependent: fails in some runs only).
	AwaitBatch Mutant = "lockproxy_broken_awaitbatch"
	// BatchSplit never cuts batches, takes unverified claims and retries
	// without bound. Caught by proxy TestSplitBatch (also
	// tests/integration TestHostileProxyBatchWedge).
	BatchSplit Mutant = "lockproxy_broken_batchsplit"
	// KeepDead renews every session as if its client just spoke (a dead
	// client keeps its locks). Caught by proxy
	// TestBuildBatchRenewsOnlyLiveClients.
	KeepDead Mutant = "lockproxy_broken_keep_dead"
	// LeaseAge reports lease age 0: the lease appears renewed when asked.
	// Caught by proxy TestKeepAliveReportsTheLeaseAge.
	LeaseAge Mutant = "lockproxy_broken_lease_age"
	// ProxyBody reads whole request bodies before the client is known.
	// Caught by tests/integration TestHostileCredentials (bodies).
	ProxyBody Mutant = "lockproxy_broken_proxybody"
	// ProxyWatchQuota ignores the tenant's watch quota in the proxy.
	// Caught by tests/integration TestHostileCredentials
	// (watch_quota_across_sessions).
	ProxyWatchQuota Mutant = "lockproxy_broken_proxywatchquota"
	// RenewOnError takes batch reply errors (unavailable) as renewals.
	// Caught by proxy TestApplyReplyRenewsOnlyWhatTheLeaderRenewed.
	RenewOnError Mutant = "lockproxy_broken_renewonerror"
	// ProxyRevoke re-reads the proxy's view of the tenants only for a
	// token it lacks, and answers shared reads and watches from a view of
	// any age, so a revoked token it knows keeps working there. Caught by
	// proxy TestStaleTenantViewForwardsSharedReads and
	// TestRevokedTokenRefusedAtTheNextRead (tests/integration
	// TestHostileProxyRevoke passes on it: the lockd refuses the revoked
	// session's renewal, and the proxy then forwards its reads).
	ProxyRevoke Mutant = "lockproxy_broken_revoke"
	// SharedAck acks the leader's invalidation without waiting for the
	// proxy's clients. Caught by tests/integration
	// TestProxySilentClientDelaysAWrite.
	SharedAck Mutant = "lockproxy_broken_shared_ack"
	// TenantLapses refuses cache grants per client session only, not per
	// tenant. Caught by tests/integration TestHostileCacherCannotBlockWrites
	// (through_a_proxy).
	TenantLapses Mutant = "lockproxy_broken_tenantlapses"
	// LapsePerWait counts a client's lapsed grant against its tenant once
	// per invalidation it left unacknowledged, not once per client
	// session. Caught by proxy TestGrantLapsesCountClientsFairly.
	LapsePerWait Mutant = "lockproxy_broken_lapse_per_wait"
	// LapseUnfair counts a lapsed grant against its tenant however little
	// of it the invalidation left. Caught by proxy
	// TestGrantLapsesCountClientsFairly.
	LapseUnfair Mutant = "lockproxy_broken_lapse_unfair"
	// ProxyParkUncounted serves the proxy's clients without the
	// listener's bound: a connection parked idle is counted by nothing.
	// Caught by proxy TestConnectionLimit.
	ProxyParkUncounted Mutant = "lockproxy_broken_park_uncounted"
	// ServedAfterClose hands a connection back to fasthttp after the
	// server's Close, and CloseServing closes nothing: a hand-back that
	// raced the Close is served on by a stopped server. Caught by
	// internal/connpark TestNothingServedAfterClose.
	ServedAfterClose Mutant = "lockd_broken_served_after_close"
	// ProxyKANoWake leaves a client's KeepAlive held at the proxy asleep
	// through its session's changes (a newer KeepAlive, an event): it is
	// answered only when its wait ends. Caught by proxy
	// TestHeldKeepAlivesParked.
	ProxyKANoWake Mutant = "lockproxy_broken_ka_nowake"
	// ProxyCloseUnbounded makes a proxy's Close wait for every client
	// connection fasthttp serves, however long its client stays silent
	// (a TLS client that never sends its ClientHello: 40 s). Caught by
	// proxy TestCloseBoundedBySilentClients.
	ProxyCloseUnbounded Mutant = "lockproxy_broken_close_unbounded"
	// RangeRoot answers a range read's whole byte span, not only the
	// nodes at or under its root: [root, root+"0") holds root's
	// siblings named root and a character before '/' ("/a-b" for
	// "/a"), which a tenant allowed to read root reads. Caught by
	// server/fsm TestRangeStaysUnderRoot (also server/cell
	// TestRangeQueriesStayUnderRoot).
	RangeRoot Mutant = "lockd_broken_range_root"
	// TxnReadsBranch answers a transaction's success-branch reads
	// whatever its outcome: a failed compare's else branch gets the
	// other branch's answers. Caught by server/cell
	// TestBranchRead.
	TxnReadsBranch Mutant = "lockd_broken_txn_reads_branch"
	// WatchKey keys the proxy's watches by (path, kind, since): one entry
	// per index. Caught by proxy TestWatchDedupe (also tests/integration
	// TestHostileProxyWatchFlood).
	WatchKey Mutant = "lockproxy_broken_watchkey"

	// --- sdk ---

	// GrantEarly makes Lock report a grant once its node is created,
	// before its predecessor goes. Caught by sdk
	// TestMutexHandoffWakesOnlyNext and TestTryLock (also tests/chaos
	// TestChaosBrokenGrant).
	GrantEarly Mutant = "lockd_broken_grant_early"
	// LendToken makes Forward lend the proxy's own token to requests
	// without one. Caught by tests/integration TestHostileCredentials
	// (also tests/chaos TestChaosBrokenLendToken).
	LendToken Mutant = "lockproxy_broken_lendtoken"
	// MovedAway makes a held Mutex retry forever when its prefix moved
	// away. Caught by sdk TestMutexLostWhenItsPrefixMovedAway.
	MovedAway Mutant = "sdk_broken_movedaway"
	// NoCellRefresh refuses an unknown cell at once without re-reading the
	// directory. Caught by sdk TestLocalErrorsSendNothing (also
	// tests/integration TestMigrateToANewCellAtOnce).
	NoCellRefresh Mutant = "sdk_broken_nocellrefresh"
	// ForeignHint makes a client that goes through proxies follow a
	// not_leader hint naming none of them: a lockd's address relayed by a
	// proxy takes it around the proxies. Caught by sdk
	// TestRedirectFollowsOnlyEndpoints.
	ForeignHint Mutant = "sdk_broken_foreignhint"
	// PooledStale makes the SDK send a request on a pooled connection its
	// server has already closed (a restarted lockd; an idle timeout):
	// a write comes back outcome-unknown though it never left. Caught by
	// sdk TestStalePooledConnectionResends.
	PooledStale Mutant = "sdk_broken_pooledstale"
	// KARetryLongTimeout gives every attempt of a KeepAlive the first's
	// long-poll timeout, and long-polls again after a failed round: two
	// hung replicas in a row take the session's whole lease. Caught by
	// sdk TestKeepAliveSurvivesTwoHungReplicas.
	KARetryLongTimeout Mutant = "sdk_broken_ka_retry_timeout"
	// SDKHungUnwatched makes the SDK wait out the attempt timeout of a
	// request sent to a hung endpoint (no liveness watch): a paused
	// leader costs a Lock 5 s. Caught by sdk TestHungLeaderIsLeftEarly.
	SDKHungUnwatched Mutant = "sdk_broken_hung_unwatched"
	// SDKHungProbeBlind makes every health probe fail: a slow replica's
	// attempt is abandoned as hung though the replica answers. Caught by
	// sdk TestSlowReplicaIsNotHung.
	SDKHungProbeBlind Mutant = "sdk_broken_hung_probe_blind"
	// SDKProbeSharedPool sends the health probes on the attempts' own
	// connection pool: a busy replica with a full pool (512 attempts
	// waiting on it) has its probe queue past its budget, and every
	// attempt is abandoned and resent. Caught by sdk
	// TestFullPoolIsNotHung.
	SDKProbeSharedPool Mutant = "sdk_broken_probe_shared_pool"
	// SDKProbeIgnoresDial gives a probe HungAfter whatever a connection
	// to its endpoint takes to open, and probes while an attempt's
	// connection is still opening: a live replica far away (800 ms to
	// connect) is taken for hung on every attempt. Caught by sdk
	// TestSlowDialIsNotHung.
	SDKProbeIgnoresDial Mutant = "sdk_broken_probe_ignores_dial"
	// SDKProbeOutlivesClose sends health probes outside the client's
	// context: Client.Close returns with a probe still dialling. Caught
	// by sdk TestProbeEndsWithClose.
	SDKProbeOutlivesClose Mutant = "sdk_broken_probe_outlives_close"
	// SDKHeldOutResent resends a call first to the replica that held it
	// its whole attempt and answered unavailable (a leader frozen under
	// a live HTTP layer): the resend is held as long again. Caught by
	// sdk TestRetryDecisions ("unavailable only at the end of the attempt").
	SDKHeldOutResent Mutant = "sdk_broken_heldout_resent"
	// SDKResendableAll marks every call through proxies resendable, a
	// write without a request id too: a proxy may apply it twice.
	// Caught by sdk TestResendableOnlyWhenDeduplicated.
	SDKResendableAll Mutant = "sdk_broken_resendable_all"
	// ProxyNoResend makes a lockproxy ignore api.HeaderResendable: a
	// client's Lock through it waits out the proxy's attempt on a hung
	// leader (5 s). Caught by proxy TestHungLeaderThroughProxy.
	ProxyNoResend Mutant = "lockproxy_broken_no_resend"
	// ProxyViewBehind makes a lockproxy refuse a cell its view lacks
	// wrong_cell (final) though its client routed by a later directory.
	// Caught by sdk TestCellCallsSayTheirDirectoryIndex (also proxy
	// TestProxyViewBehindTheClient and tests/integration
	// TestNotHostedCellNamesAReplica).
	ProxyViewBehind Mutant = "lockproxy_broken_viewbehind"

	// BatchReplyEvents lets a KeepAlive batch reply carry every session's
	// events, past api.MaxBatchReplyEvents (and so past what a proxy
	// decodes). Caught by server/session TestBatchReplyEventsBounded.
	BatchReplyEvents Mutant = "lockd_broken_batchreplyevents"

	// --- api (the binary KeepAlive encoding) ---

	// WireCount makes the binary decoder take a list's count past its
	// named limit (MaxReplyEvents, MaxBatchSessions): only the bytes
	// left bound it. Caught by api TestWireDecodeRefusesOverLimit.
	WireCount Mutant = "api_broken_wirecount"

	// --- the audit log (issue 26) ---

	// AuditToken names the caller in an audit record by its token itself
	// instead of the token's id. Caught by server/httpapi
	// TestAdminRoutesAreAudited (it scans every record for the tokens).
	AuditToken Mutant = "lockd_broken_audittoken"
	// AuditReadsStream lets the audit log's session probe read a request
	// body that still streams (refused before its caller was known):
	// PostBody reads it whole, without a bound. Caught by server/httpapi
	// TestAuditUnauthenticatedReadsNoBody.
	AuditReadsStream Mutant = "lockd_broken_audit_reads_stream"
	// PprofAnyAddr lets lockproxy --pprof-addr serve its profiles on any
	// address and to any Host. Caught by proxy/cmd/lockproxy
	// TestServePprof.
	PprofAnyAddr Mutant = "lockproxy_broken_pprof_any_addr"
	// TimerSlackOneThread makes lockd serve and lockproxy set their timer
	// slack on the calling thread only, without re-executing: the
	// runtime's threads created before main (the system monitor's) keep
	// the OS's. Caught by internal/timerslack TestTimerSlackEveryThread
	// (and tests/cluster TestLifecycle, on a real lockd and lockproxy).
	TimerSlackOneThread Mutant = "lockd_broken_timer_slack_one_thread"
	// StageContainerUngated lets a prefix move stage container
	// directories onto a cell below log codec 2, whose older replicas
	// would drop them. Caught by server/cell TestStageGateContainers.
	StageContainerUngated Mutant = "lockd_broken_stage_container_ungated"

	// --- etcd gateway: server reads (ranges, change ring) ---

	// RangeACL lets RouteRange, RouteRanges and a transaction's branch
	// reads skip their read check on Root: a tenant reads another's
	// subtree. Caught by server/httpapi TestRangeAuthorization and
	// TestTxnBranchReadsChecked.
	RangeACL Mutant = "lockd_broken_range_acl"
	// ChangesFloor lets the change ring drop changes without raising its
	// Floor, and a state read from a snapshot keep Floor 1: a gap is
	// served as a complete history. Caught by server/fsm
	// TestChangeRingFloor.
	ChangesFloor Mutant = "lockd_broken_changes_floor"
	// ChangesSplit lets a read of the change ring stop in the middle of
	// an index (at its limit): a reader resuming after that index skips
	// the rest of it, or, refusing to, is stuck there. Caught by
	// server/fsm TestChangesPageKeepsAnIndexWhole.
	ChangesSplit Mutant = "lockd_broken_changes_split"

	// --- etcd gateway: server txn (compares) ---

	// TxnValueMissing makes a value compare on a missing node hold as if
	// its value were empty (etcd: a value compare on a missing key never
	// holds). Caught by server/fsm TestTxnCompares.
	TxnValueMissing Mutant = "lockd_broken_txn_value_missing"
	// TxnRevEpoch makes revision compares ignore the directory epoch
	// (indexes only): a revision of an older epoch passes as current.
	// Caught by server/fsm TestTxnCompareEpoch.
	TxnRevEpoch Mutant = "lockd_broken_txn_rev_epoch"
)

// The etcd gateway's watch and election (proxy/etcdgw).
const (
	// --- etcd gateway: watch and election ---

	// EtcdWatchACL lets a watch start without the caller's read check on
	// its span (the feed reads with the proxy's credentials): a tenant
	// watches another's keys. Caught by tests/integration
	// TestEtcdWatchOutsideGrantRefused and proxy/etcdgw
	// TestWatchCreateChecksGrant.
	EtcdWatchACL Mutant = "lockd_broken_etcd_watch_acl"
	// EtcdWatchGap lets a watch whose start revision is below the change
	// ring's Floor replay from Floor instead of answering compacted: the
	// changes in between are silently skipped. Caught by proxy/etcdgw
	// TestWatchBelowFloorCompacted.
	EtcdWatchGap Mutant = "lockd_broken_etcd_watch_gap"
)

// The etcd gateway's core (proxy/etcdgw, proxy/proxy_etcd.go).
const (
	// --- etcd gateway: core ---

	// EtcdAuth makes the gateway's backend send the proxy's own
	// credentials instead of the etcd caller's token: a tenant reads and
	// writes outside its grant. Caught by tests/integration
	// TestEtcdKV (subtest outside-grant).
	EtcdAuth Mutant = "lockd_broken_etcd_auth"
)

// The etcd gateway's leases and Lock service (proxy/etcdgw lease*.go,
// lock*.go).
const (
	// --- etcd gateway: leases ---

	// EtcdLeaseBinding makes the lease table ignore the credential: a
	// lease id another credential granted is found, kept alive, revoked
	// and written with. Caught by proxy/etcdgw TestLeaseBoundToCredential.
	EtcdLeaseBinding Mutant = "lockd_broken_etcd_lease_binding"
	// EtcdLeaseTTL makes a KeepAlive answer the granted TTL instead of
	// what is left of the lease's sessions' guarantee. Caught by
	// proxy/etcdgw TestKeepAliveAnswersWhatIsLeft.
	EtcdLeaseTTL Mutant = "lockd_broken_etcd_ttl"
	// EtcdLockEarly makes Lock answer as soon as its lock node is made,
	// before the node holds the lock. Caught by proxy/etcdgw
	// TestLockWaitsForGrant and tests/integration
	// TestEtcdLeaseLock/lock_exclusion.
	EtcdLockEarly Mutant = "lockd_broken_etcd_lock_early"
)

// The etcd gateway's hardening from the attack review (proxy/etcdgw).
const (
	// --- etcd gateway: attack fixes ---

	// EtcdMTLS serves the etcd port with the client listener's TLS
	// configuration as it is (a client certificate verified only if
	// given) while the gateway's requests skip the proxy's certificate
	// check: a client without a certificate is served. Caught by proxy
	// TestEtcdRequiresClientCert.
	EtcdMTLS Mutant = "lockd_broken_etcd_mtls"
	// EtcdKeepAliveCap drops the per-tenant bound on LeaseKeepAlive
	// streams: one tenant holds every stream of the gateway and the
	// others' leases cannot be renewed. Caught by proxy/etcdgw
	// TestKeepAliveStreamsPerTenant.
	EtcdKeepAliveCap Mutant = "lockd_broken_etcd_keepalive_cap"
	// EtcdWatchCap drops the per-tenant bound on watches: one tenant
	// fills the gateway's feed subscribers and the others' watches are
	// refused. Caught by proxy/etcdgw TestWatchesPerTenant.
	EtcdWatchCap Mutant = "lockd_broken_etcd_watch_cap"
)

// The etcd gateway's reads at a past revision (proxy/etcdgw kv_past.go).
const (
	// --- etcd gateway: past reads ---

	// EtcdPastRead makes a read at a past revision ignore the changes
	// after it: the current state is answered as the state at the
	// revision (an STM reads values newer than its snapshot). Caught by
	// proxy/etcdgw TestPastRead.
	EtcdPastRead Mutant = "lockd_broken_etcd_pastread"
	// EtcdTxnUnread skips the read of every key a transaction puts, not
	// only of one a create-revision-0 compare proves missing: a put of
	// a key that is there is pinned missing, fails its pin every
	// attempt and is refused Aborted. Caught by proxy/etcdgw
	// TestTxnUnreadOnlyWhenProvenMissing.
	EtcdTxnUnread Mutant = "lockd_broken_etcd_txn_unread"
	// EtcdTxnSnapshot makes a transaction that writes nothing read its
	// compares' keys and its reads one at a time, each at its own index
	// (a write between two of them shows a state that never was: an
	// STM's snapshot mixes revisions). Caught by proxy/etcdgw
	// TestTxnReadsOneSnapshot and, on real lockds, by the upstream
	// TestSTMSerialize (now and then).
	EtcdTxnSnapshot Mutant = "lockd_broken_etcd_txnsnapshot"
	// EtcdNoForward makes a gateway answer a lease another gateway
	// granted itself (not found) instead of sending the request there: a
	// client given two gateways loses its lease. Caught by proxy/etcdgw
	// TestLeaseAcrossGateways and tests/integration
	// TestEtcdTwoGateways.
	EtcdNoForward Mutant = "lockd_broken_etcd_noforward"
)

// A cell leader's adoption of the prefixes the directory gives it.
const (
	// AdoptLostWakeup makes a placement that arrives while an adopt pass
	// runs (the pass read the placement before it) wait for the next
	// directory change: a prefix assigned just as a leader took over is
	// "taking up" until then (CI: puts after an assign timed out).
	// Caught by server/cell TestRerunLosesNoCall.
	AdoptLostWakeup Mutant = "lockd_broken_adopt_wakeup"
)

// A client's KeepAlive parked without a goroutine on the leader
// (server/session/park.go, server/httpapi/park.go).
const (
	// ParkNoWake makes a parked KeepAlive deaf to everything but its
	// timer: an event, a newer KeepAlive, the session's end or the end
	// of leadership answers it only when its wait is over (a lock
	// hand-off reaches its waiter up to half a lease late; a deposed
	// leader's answer comes late). Caught by server/session
	// TestRenewAsyncWakes.
	ParkNoWake Mutant = "lockd_broken_park_wake"
	// ParkUncounted drops the lockd API listener's bound on open
	// connections: parked KeepAlives' connections, which fasthttp's
	// Concurrency does not count, grow past MaxConnectionsPerLockd
	// toward the process's descriptor limit. Caught by server/lockd
	// TestParkedConnectionsCounted.
	ParkUncounted Mutant = "lockd_broken_park_uncounted"
	// ParkLostWaiter makes a KeepAlive park over another of its session
	// that parked while the first renewal under a new leader was being
	// confirmed: that one is never answered. Caught by server/session
	// TestConcurrentFirstRenewalsAllAnswered.
	ParkLostWaiter Mutant = "lockd_broken_park_lost"
)

// An idle keep-alive connection held by the idle poller
// (server/httpapi/idle.go, idlepoll_linux.go).
const (
	// IdleParkUnread parks a connection whose request body was not read:
	// the body's bytes are then taken for the next request, and the
	// client reads an answer to a request it never sent. Caught by
	// server/httpapi TestIdleParkedConnections (unread body).
	IdleParkUnread Mutant = "lockd_broken_idle_unread"
	// IdleNoTimeout never closes a parked idle connection: one its
	// client forgot is held for ever. Caught by server/httpapi
	// TestIdleParkedConnections (idle timeout).
	IdleNoTimeout Mutant = "lockd_broken_idle_timeout"
)

// The SDK's directory view.
const (
	// DirRegress makes the SDK adopt whatever directory it reads, an
	// older one than it holds included (a lockd without a directory
	// replica answers its own lagging view): a prefix assigned a moment
	// ago vanishes from the client's map (CI: TestReAddReplicaOnSameLockd
	// "no cell serves prefix /cell3"). Caught by sdk
	// TestDirectoryNeverGoesBack.
	DirRegress Mutant = "lockd_broken_dir_regress"
)

// The health assessment (status page, lockctl status).
const (
	// HealthBlindQuorum makes the assessment count a replica whose lockd
	// did not answer as up: a cell with a replica down, or with no
	// quorum, shows healthy. Caught by server/health TestAssess and the
	// status page's end-to-end test.
	HealthBlindQuorum Mutant = "lockd_broken_health_quorum"
)

// What the documentation promises (issue 28).
const (
	// ParentsDefault makes the SDK's Put and Create send no make_parents
	// unless asked (the default before issue 28, unlike lockctl put): the
	// README's first Put fails with no_node. Caught by sdk
	// TestParentsByDefault.
	ParentsDefault Mutant = "lockd_broken_parents_default"
	// JSONNulls makes lockctl -o json print an empty list as null, not
	// [] (docs/lockctl.md, "Conventions"). Caught by ctl TestJSONShapes.
	JSONNulls Mutant = "lockd_broken_json_nulls"
)

// all is every mutant (TestAllListsEveryConstant holds it to the
// constants above).
var all = []Mutant{
	AbortDelay, CheckAnyGranted, CodecDropsField, DirDelay, EphDelay, ExportOwner, KeptFair,
	LossyExport, MoveDelay, MoveKeepsEpoch, NonceKey, ParentsFrom,
	RestoreKeepsLeaderEpoch, RestoreKeepsPrefixes, SealKeepsEphemerals,
	Secret, StageGen,
	CopyDigest, MigrationDriver, RestoreKeepsEpoch, CodecFloorIgnored,
	CodecUngated,
	TxnHolds, TxnContainerNow,
	PermitOffByOne, PermitsMixed,
	RWDowngradeUnheld, RWModeAnySession, RWUpgradeKeepsAll, RWUpgradeNewToken, RWSecondUpgradable,
	ContainerSeqFromZero, ContainerIgnoresDelay,
	SkipsInvalidation, SkipsFence, UnrecordedGrant, SkipsParent,
	CachesParents, CacheSettle, CacheWindow, DeclaredWindow, FenceCachers,
	LockDelayLostOnFailover, WatchQuota,
	TenantMisses, EarlyExpiry, FairDeadline, RenewExpiring, RestoreNoHold, LoseEvents,
	HandOverRenews, HandOverStaleCharge, HandOverUncancelled, HandOverSkipped, ReelectedUnsaid,
	StaleConn, RefusedRedial, ProposalOutlivesLeader,
	ACL, BodyLimit, FreeGrants, NoHostHint, ViewBehind, MoveAgeSeen, TimeoutNotApplied, RefreshGap, RenewCheck,
	RouteLabel, ClientCerts,
	DirViewRead, FDExhaust, MemberNoBarrier, RaftCA, SkipsUnloadWait,
	ProxyACL, AwaitBatch, BatchSplit, KeepDead, LeaseAge, ProxyBody,
	ProxyWatchQuota, RenewOnError, ProxyRevoke, SharedAck, TenantLapses, LapsePerWait, LapseUnfair, ProxyParkUncounted, ServedAfterClose,
	ProxyKANoWake,
	ProxyCloseUnbounded,
	TxnReadsBranch,
	RangeRoot,
	EtcdTxnUnread,
	WatchKey, ProxyEventCap,
	GrantEarly, LendToken, MovedAway, NoCellRefresh, ForeignHint, PooledStale, KARetryLongTimeout, ProxyViewBehind,
	SDKHungUnwatched, SDKHungProbeBlind, ProxyNoResend, SDKProbeSharedPool, SDKProbeIgnoresDial, SDKResendableAll, SDKProbeOutlivesClose, SDKHeldOutResent,
	WireCount, BatchReplyEvents,
	AuditToken,
	AuditReadsStream, StageContainerUngated, PprofAnyAddr, TimerSlackOneThread,
	RangeACL, ChangesFloor, ChangesSplit, // etcd gateway: server reads
	TxnValueMissing, TxnRevEpoch, // etcd gateway: server txn
	EtcdWatchACL, EtcdWatchGap, // etcd gateway: watch and election
	EtcdAuth, // etcd gateway: core

	EtcdLeaseBinding, EtcdLeaseTTL, EtcdLockEarly, // etcd gateway: leases
	EtcdMTLS, EtcdKeepAliveCap, EtcdWatchCap, // etcd gateway: attack fixes
	EtcdPastRead, EtcdTxnSnapshot, EtcdNoForward, // etcd gateway: past reads, one snapshot, forwarding
	AdoptLostWakeup,                           // a cell's adoption of its prefixes
	ParkNoWake, ParkUncounted, ParkLostWaiter, // a parked KeepAlive
	IdleParkUnread, IdleNoTimeout, // an idle connection held by the poller
	DirRegress,                // the SDK's directory view
	HealthBlindQuorum,         // the health assessment
	ParentsDefault, JSONNulls, // what the documentation promises
}

// parse reads a LOCKD_MUTANT value: empty (none), one mutant name, or
// several joined by commas. An unknown name is an error.
func parse(v string) (map[Mutant]bool, error) {
	on := map[Mutant]bool{}
	if strings.TrimSpace(v) == "" {
		return on, nil
	}
	known := make(map[Mutant]bool, len(all))
	for _, m := range all {
		known[m] = true
	}
	for _, name := range strings.Split(v, ",") {
		m := Mutant(strings.TrimSpace(name))
		if !known[m] {
			return nil, fmt.Errorf("%s=%q: no mutant named %q (see internal/mutant/mutant.go and mutants.tsv)", Env, v, m)
		}
		on[m] = true
	}
	return on, nil
}
