// Package chaos is the fault-injection suite: it proves the service's
// safety promises under faults, and keeps proving them as later changes
// land. It starts a real cell of five separate `lockd serve` processes
// (tests/cluster), drives many concurrent clients through the SDK,
// injects faults on a schedule a seed reproduces, records what happened,
// and checks the record. `make chaos` runs it with production timing for
// DURATION on SEED; `go test ./tests/chaos/` runs one fixed-seed round
// with test timing.
//
// # Where it sits
//
// The suite is a client of the service like any other: it imports `sdk`,
// `sdk/fence`, `api` and `tests/cluster`, never `server/...`. Every
// fact the checkers rely on comes from the service's own replies (Raft
// indices, owners, create indices, tokens) or from the protected resource,
// never from the client library's belief, so a bug in the library shows up
// as a violation instead of being trusted.
//
// # Real partitions: one network namespace per replica
//
// Each replica runs in a network namespace of its own (cluster.Netns):
// a veth pair joins it to one bridge in the root namespace, which carries
// 10.211.S.1/24; replica i listens on 10.211.S.(10+i) for its API and Raft.
// The test process reaches every API address over the bridge, and the
// replicas reach each other through it. lockd is started with `ip netns
// exec NS lockd serve ...`; ip enters the namespace and execs lockd, so the
// PID the harness signals is lockd's own (kill -9, SIGSTOP, SIGCONT work
// unchanged). A partition is a set of blackhole routes inside the
// namespaces (`ip route add blackhole PEER/32`, both directions for a
// cut): isolating the leader cuts it from the four others, a 2/3 split
// cuts every link across the two groups, and healing deletes the routes.
// Namespaces and links carry the owner's PID in their names; every run
// sweeps those of dead owners first and deletes its own on the way out.
//
// Why namespaces rather than a fault-injecting TCP relay on the Raft
// links: dragonboat dials its peers itself, from its own address, and
// multiplexes every message to a peer over a connection it chooses. A relay
// listening on replica B's advertised address sees connections arrive from
// A, C, D and E alike — all from 127.0.0.1 — and cannot tell which replica
// a connection comes from, so it can only cut everything to B or nothing.
// It cannot cut one pair, so it cannot build a 2/3 split or a one-way cut,
// and it would also have to understand dragonboat's framing to be more than
// a blunt on/off switch. With a namespace per replica, every packet's
// source and destination address name the replicas, and the kernel drops
// exactly the pairs we choose, for the Raft transport and anything else
// alike, with no code of ours on the data path. (This machine's kernel has
// no sch_netem, so delay and loss are not injected.) Without root, or
// without `ip netns`, the run fails, unless CHAOS_NO_PARTITIONS=1 (or
// -no-partitions) says to run on loopback without the partition nemeses;
// the JSON line's "nemeses" counts the fault steps that ran, by kind.
//
// # Nemeses
//
// A schedule (Schedule) is rounds of every nemesis in an order shuffled
// by the seed, with hold times drawn from it: kill -9 and restart of the
// leader, of a follower, of two replicas at once, of three (no majority:
// nothing may commit until one returns, then commits must resume);
// SIGSTOP/SIGCONT of the leader (once per round past the lease); the
// leader cut off from the majority; the cell split 2/3; and, on the
// takeover lock, kill -9 of the holder process (cmd/holder) and a SIGSTOP
// of it past its lease. Every step starts from a healthy cell and heals
// before the next. The seed fixes the steps, their order, holds and
// target choices; who the leader is when a step runs is the cell's doing.
// Two seeds' schedules are pinned in testdata (TestSchedulePinned).
//
// Each nemesis is a type (nemeses.go, as etcd's robustness failpoints
// are): its kind, its preconditions (needs: network namespaces, proxies,
// the holder process, a lockd_faults build, a backup store, a budget of
// new cells, a ready leader) and its injection, which holds the fault and
// heals it. The executor (nemesis.go) brings the cell back to health,
// checks the step's needs (a step whose needs are unmet is logged and not
// counted) and injects. Run is phases in that order: set up, workloads,
// schedule, heal, read back, validate (run_*.go).
//
// The move, restore and disk nemeses (issue 23) work on /side, which
// holds a bulk of nodes (so that a copy takes several pages), config keys
// the side workers read from their caches, unique acknowledged writes and
// a lock; a sampler reads, every 100–250 ms, the state of /side and /demo
// on every lockd that says it leads a cell (the admin prefix op "state":
// serving, sealed, staged, at which epoch):
//
//	race-move: two MovePrefix drivers 30–90 ms apart on two clients; both
//	  done or the second refused are accepted and counted ("move,
//	  restore and disk outcomes" in the summary); a migration left in
//	  flight is resumed as an operator would; every bulk node must be there.
//	kill-driver: a `lockctl migrate` process kill -9'd by PID at its first
//	  "copying" line, then two drivers resume at once.
//	move-new-cell: a cell created and /side moved to it at once (at most
//	  three per run); a failed move on a healthy cluster is a violation.
//	restore-old: lockctl backup of the side cell, writes after it, on even
//	  picks /side moved to demo (a client keeps the directory of before),
//	  then the operator's restore on a live cluster: lockctl restore
//	  (RestoreCell) on three lockds, and on each in turn stop, `lockd
//	  restore`, start. The stale client then tries a lock a fresh client
//	  holds.
//	slow-fsync / fail-fsync: lockd is built with -tags lockd_faults
//	  (server/lockd/faults_on.go; production builds have no such code),
//	  whose NodeHost filesystem (Expert.FS) makes every fsync sleep or
//	  fail while the control file LOCKD_FAULT_FSYNC names ("{id}": the
//	  lockd's id) says "slow D" or "fail". slow-fsync slows a majority
//	  with the leader for a quarter to half a lease (proposals time out
//	  while their entries may commit); fail-fsync fails one replica's
//	  fsyncs (the leader's on even picks), expects it to exit, restarts it.
//	move-held: a holder process holds a lock under /side and an
//	  in-process waiter queues behind it; on odd picks the holder is
//	  stopped (SIGSTOP) before the move. The holder reports its local
//	  lease end every loop ("lease" lines).
//	expire-in-flight: a holder process (through the proxies) is stopped
//	  for half its lease (its session must live on: a leader that
//	  expires it early tells it so before its lease ends, checker m3),
//	  then for its lease; just before the leader expires it every replica's
//	  fsync turns slow (1.5 s), and the holder is resumed while the
//	  expire_session entry is committing: its KeepAlive meets an expiry in
//	  flight (answered unavailable), which must not renew it.
//
// -only (CHAOS_ONLY) runs a list of nemeses alone. A chaos command or
// test binary built with -tags lockd_mutants runs with the mutants LOCKD_MUTANT
// selects (internal/mutant; lockd and lockproxy are then built with -tags
// mutants too, and inherit the selection): `make chaos MUTANT=…`.
//
// # Workloads
//
// Exclusive locks with fenced writes to an in-process Resource (sdk/fence
// semantics; it records every access attempt, accepted or refused, with
// token, session and whether the writer's lock Context was still live);
// shared locks beside an exclusive writer on one path (readers check the
// fence without raising it); leader election (Campaign, Leader, fenced
// writes with the leader's token, Resign); config get/put/compare-and-set
// on a few keys; session churn (open, ephemeral create, close, the node
// must be gone); unique acknowledged puts; an observer listing every lock's
// waiters; probes that put back to back to time fail-overs; a holder
// process and its in-process waiter for takeovers; and etcd clients
// (workload_etcd*.go: concurrency.Mutex, the v3lock Lock service and
// concurrency.Election through the proxies' etcd gateways, each client
// on one gateway), under the exclusion, fencing (a key's create revision
// is its token), election and liveness checkers; a holder stops counting
// itself holder at its session's end, a KeepAlive answered "lease not
// found", or its lease clock (the TTL its last KeepAlive answered,
// counted from that KeepAlive's send).
//
// Tokens are required (cluster.Options.AdminToken): the workloads are one
// tenant, "workload", with write and lock on /demo/chaos (the holder
// process gets its token in CHAOS_HOLDER_TOKEN); the executor's own client
// (move-prefix, replace-replica, the quorum probe), the final reads and the
// lockproxies use the bootstrap admin token.
//
// # The hostile tenant (hostile*.go; -no-hostile to run without)
//
// During the fault phase "mallory", with read on /demo/chaos and write on
// a sandbox /demo/mallory/own whose parent does not exist, attacks every
// lockd and every lockproxy at a bounded rate (HostileRate: 60 requests/s
// short, 200 in `make chaos`, plus its sessions' requests; every loop
// bounded in count, stopping with the fault phase), as issue 22 lists: no,
// empty, malformed, unknown and revoked credentials (a second tenant, with
// write, revoked at the start after opening a session) and its own reader
// token on writes of the workloads' nodes, creates, tenants, migrations,
// member changes, KeepAlive batches, status and reads outside its grant;
// make_parents outside its grant (hole 10); random routes (8); KeepAlives
// for made-up sessions with oversized secrets through the proxies (3);
// and, in phases of three cache windows alternating between a lockd and
// each proxy, cached gets of the workloads' config and lock nodes and of
// the lock nodes next to be made, with KeepAlives that never acknowledge
// an invalidation (5), cached gets of many missing paths (7) and watch
// floods on one path with distinct since values through a proxy (6). It
// counts its requests by kind and answer; the report and the JSON line
// carry the counts, the proxies' goroutines and memory, /metrics sizes,
// and the workloads' write latency inside and outside the attack phases.
//
//	h1. JudgeHostile: no request outside its grants answered 2xx, and no
//	    directory read of its lists the tenants (each violation with the
//	    request).
//	h2. CheckHostileState: the tenants, prefixes and cells are as before
//	    it started, no node it tried to create exists, no value it tried
//	    to write is there (the workloads' own data: checkers c and d).
//	h3. CheckWriteStalls: no direct workload write took longer than one
//	    cache window (api.CacheWindowFor(lease)) plus stallSlack, unless
//	    the probes saw the cell commit nothing meanwhile (an outage: the
//	    demo probes' for the demo workloads, the moving prefix's own
//	    probes, side-probe*, for its workers, since a fresh cell of three
//	    replicas loses its majority to a fault demo's five ride out); a
//	    write of a cached node (config-*) is also excused the longest span
//	    it shares with one fence, a leader fault to one cache window after
//	    the new leader's first commit (executor.fenceAfter: the new
//	    leader's fence holds it by design; one fence at most, so a cacher
//	    that never lets go is still caught: lockd_broken_cachewindow).
//	    expire-in-flight's slow fsyncs on every replica are a leader fault
//	    of every cell (a step worker blocked 1.5 s in fsync misses its
//	    heartbeats): its fence runs from the slowing to one cache window
//	    after the first commit once the last slow fsync returned
//	    (diskFence), which covers the election and fence of a cell the
//	    probes do not see (/side). No workload session lost is checker d.
//	    A violation says the write's attempts (sdk.Trace.Tries: where each
//	    went, when, and how it ended), kept for a write slower than
//	    traceSlowAfter (tracedOp).
//
// Its mutant: `LOCKD_MUTANT=lockproxy_broken_lendtoken go test -tags
// mutants -run TestChaosBrokenLendToken ./tests/chaos/` runs lockproxies
// that lend their admin token to requests with no Authorization header
// (hole 1); h1 (and h2, c, d) must fire.
//
// # Checkers (package check; each has a test that feeds it a broken history)
//
// The history types and the checkers live in tests/chaos/check, apart
// from the runner, the nemeses and the workloads.
//
//	a. CheckMutualExclusion: in Raft-index order, no two nodes of one lock
//	   held at once if either is exclusive, and no node waits after it held.
//	   A held span ends at the node's deletion index (a data watch on every
//	   lock node the observer lists), not at its last sample.
//	   CheckIntervals (Jepsen-style, real time): every client of this
//	   process records, on the process's one monotonic clock, when its
//	   lock's Context became live (the grant returned) and when it was
//	   cancelled or Unlock was called; no two intervals of one lock overlap
//	   by more than sdk.DriftMargin. Holder processes are left out (their
//	   Context is on their own clock, and a paused one reports its loss only
//	   after SIGCONT). A grant whose node is already gone while its Context
//	   is live is a violation (etcd #11456), never dropped.
//	b. CheckFencing: the resource records every attempt, accepted or
//	   refused; the checker replays the fence's rule itself, checks that
//	   accepted writes are token-monotonic per lock and never interleave
//	   between holders, that every accepted token is the create index of a
//	   node the service saw holding, owned by the writer's session, and
//	   that no client of this process was refused as stale while its lock's
//	   Context was still live (two holders at once, whatever the fence did).
//	c. CheckLinearizable: config histories are linearizable (porcupine;
//	   unknown outcomes may or may not have happened); a porcupine timeout
//	   (Unknown) fails the run.
//	d. CheckAcked, CheckSessions: every acknowledged write reads back (one
//	   that cannot be read fails too); no healthy client's session ended
//	   unless the cell committed nothing for lease + grace, after which the
//	   client itself gives up (a cell without a leader expires nobody).
//	e. CheckLiveness: after the faults stop every waiter is granted within
//	   a bound; CheckNoQuorum: nothing succeeded while two replicas ran.
//
//	m1. CheckSingleServer: no two cells serve a prefix at one epoch, and
//	    no cell serves it at an older epoch in a read begun after another
//	    cell's read at a newer epoch returned (a restored cell serving its
//	    backup's prefixes).
//	m2. CheckPrefixWrites: every acknowledged write under /side reads back
//	    after every move; a restore loses exactly the writes called after
//	    its backup returned, and only under the prefixes the directory
//	    gives the restored cell.
//	m3. CheckSessionSafe: no client is told its session is safe
//	    (SessionSafe, or its local lease: sampled every 100 ms by the side
//	    workers, reported every loop by the holder processes) past the
//	    moment it learned the cell ended it (restore windows excused).
//	m4. CheckMovedHolds: the waiter's grant on the new cell comes after
//	    the old holder's last reported lease end (plus lock-delay), unless
//	    the holder reported the loss first.
//	c'. CheckLinearizable on the side config keys, cut into eras at each
//	    restore of their cell (SplitRestoreEras: a restored key starts in
//	    an unknown state its first definite answer fixes).
//
// Their mutants (lockd built with lockd_faults and mutants):
// `LOCKD_MUTANT=lockd_broken_restoreprefixes,lockd_broken_movedelay chaos
// -short -rounds=1 -seed=2 -only=restore-old,move-held` (chaos built with
// -tags lockd_mutants) fires m1 (the restored cell serves /side at its old
// epoch; the stale client holds what the fresh one holds) and m4 (granted
// 4.2 s into the paused holder's lease). TestChaosBrokenMoves
// (mutants_test.go) runs the expire-in-flight nemesis on
// lockd_broken_earlyexpiry (sessions expired half a lease early): m3 fires
// on the holder paused for half its lease ("given a lease until 26.964s …,
// but it expired by 25.003s"); and move-prefix with kill-leader on
// lockd_broken_cache (changes commit without invalidating their cachers):
// c' fires. m2 fires on lockd_broken_lossyexport with
// lockd_broken_copydigest (the export drops nodes and the copy's digest is
// not checked); it is also proven on broken histories
// (check/moves_test.go).
//
// The broken build: `LOCKD_MUTANT=lockd_broken_grant_early go test -tags
// mutants -run TestChaosBrokenGrant ./tests/chaos/`, or `make chaos-short
// MUTANT=lockd_broken_grant_early`, runs an SDK whose Lock reports a grant
// as soon as its node is created (mutant.GrantEarly); the interval,
// grant-confirmation and fencing checkers must fire. The holder process
// is built without -tags lockd_mutants.
//
// While the run goes on: every grant is confirmed by a lock/state read,
// the service's election leader is the campaigner, churned sessions own
// their nodes and leave none behind, the no-majority probe lock is not
// granted, fail-over, takeover and recovery stay within bounds, and no
// replica exits by itself (a crash is reported with the log lines that say
// why, and a cell that cannot recover stops the schedule).
//
// # Measured every run
//
// Cell failover (leader killed, paused or cut off → first commit under the
// new leader, from the probes), takeover (holder process killed or paused
// → the waiter's grant), sessions lost.
package chaos
