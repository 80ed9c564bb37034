package api

// RouteStatusHealth (GET, admin) is the cluster's health as one lockd
// assesses it: every cell with a level and the reasons for it, moves in
// flight, proxies, lockds and tenants. The status page and `lockctl
// status` read it, so both give the same reasons.
const RouteStatusHealth = "/v1/status/health"

// HealthLevel says how a cell (or the cluster) is. The levels are ordered:
// ok < degraded < unknown < critical.
type HealthLevel string

const (
	HealthOK       HealthLevel = "ok"       // nothing to do
	HealthDegraded HealthLevel = "degraded" // serving, with something an operator should act on
	HealthCritical HealthLevel = "critical" // not serving, or one more fault from it
	HealthUnknown  HealthLevel = "unknown"  // reserved: a cell none of whose replicas answers is critical
)

// Rank orders levels for "worst first": ok 0, degraded 1, unknown 2,
// critical 3.
func (l HealthLevel) Rank() int {
	switch l {
	case HealthDegraded:
		return 1
	case HealthUnknown:
		return 2
	case HealthCritical:
		return 3
	}
	return 0
}

// Health reason codes: stable; a script may match them.
const (
	ReasonNoLeader          = "no_leader"           // no replica knows a leader
	ReasonNoQuorum          = "no_quorum"           // fewer voters up than a majority
	ReasonQuorumAtRisk      = "quorum_at_risk"      // exactly a majority up: one more loss stops the cell
	ReasonReplicaDown       = "replica_down"        // a voter (or learner) does not answer or follow the leader
	ReasonReplicaStalled    = "replica_stalled"     // a replica answers but has applied nothing for a while, behind the leader
	ReasonCommitsFailing    = "commits_failing"     // the leader's proposals fail (time out, lose the leadership)
	ReasonFsyncFailing      = "fsync_failing"       // a replica's disk fails its fsync probe, or the probe hangs
	ReasonCommitSlow        = "commit_slow"         // the leader's commit p99 over the spec's acquire target
	ReasonFsyncSlow         = "fsync_slow"          // a replica's disk fsync p99 over the spec's warning
	ReasonInvalidationStuck = "invalidation_stuck"  // a change waits on cache acknowledgements past a cache window
	ReasonExpiries          = "expiries_high"       // many sessions expired in the last minute
	ReasonSessionsNearLimit = "sessions_near_limit" // the cell holds most of the sessions it may (MaxSessionsPerCell)
	ReasonTokenHeadroom     = "token_headroom_low"  // the fencing-token index bits run out soon
	ReasonMoveStuck         = "move_stuck"          // a prefix move has not finished for long
	ReasonLockdDown         = "lockd_unreachable"   // a lockd of the directory does not answer
	ReasonProxyDown         = "proxy_unreachable"   // a registered lockproxy does not answer
	ReasonProxyBehind       = "proxy_batch_late"    // a proxy's last confirmed KeepAlive batch to a cell is old
	ReasonTenantQuota       = "tenant_near_quota"   // a tenant uses most of a quota on a cell
)

// HealthReason is one thing wrong, about Subject ("cell payments",
// "lockd 3", "proxy 127.0.0.1:7201", "tenant web").
type HealthReason struct {
	Level   HealthLevel `json:"level"`
	Code    string      `json:"code"`
	Subject string      `json:"subject"`
	Message string      `json:"message"`
}

// ClusterHealth is GET /v1/status/health.
type ClusterHealth struct {
	// Self is the lockd that assessed it; AtMS when (Unix ms).
	Self string `json:"self"`
	AtMS int64  `json:"at_ms"`
	// Level is the worst of the cells' levels and the problems'.
	Level HealthLevel `json:"level"`
	// Problems are every reason below ok, worst first: what to look at.
	Problems       []HealthReason `json:"problems"`
	DirectoryIndex uint64         `json:"directory_index"`
	Cells          []CellHealth   `json:"cells"`
	Moves          []MoveHealth   `json:"moves"`
	Proxies        []ProxyHealth  `json:"proxies"`
	Lockds         []LockdHealth  `json:"lockds"`
	Tenants        []TenantHealth `json:"tenants"`
}

// CellHealth is one cell: where it runs, how it is, and why.
type CellHealth struct {
	Cell     string         `json:"cell"`
	Prefixes []string       `json:"prefixes"`
	Level    HealthLevel    `json:"level"`
	Reasons  []HealthReason `json:"reasons"`
	// LeaderID is the leading replica's lockd (0: none known).
	LeaderID  uint64 `json:"leader_id"`
	LeaderAPI string `json:"leader_api,omitempty"`
	Term      uint64 `json:"term"`
	Voters    int    `json:"voters"`
	VotersUp  int    `json:"voters_up"`
	// Replicas in lockd order.
	Replicas []CellReplicaHealth `json:"replicas"`
	Sessions int                 `json:"sessions"`
	Nodes    int                 `json:"nodes"`
	// CommitP99MS is the leader's proposal-to-apply p99 over its recent
	// commits (0: none yet); FsyncP99MS the slowest replica disk's p99
	// (FsyncLockd names it).
	CommitP99MS float64 `json:"commit_p99_ms"`
	FsyncP99MS  float64 `json:"fsync_p99_ms"`
	FsyncLockd  uint64  `json:"fsync_lockd,omitempty"`
	// OldestInvalidationMS is how long the oldest change still waiting
	// for its cachers' acknowledgements has waited (0: none).
	OldestInvalidationMS int64 `json:"oldest_invalidation_ms"`
	// ExpiriesPerMinute counts the sessions the leader expired in the
	// last minute.
	ExpiriesPerMinute int    `json:"expiries_per_minute"`
	TokenHeadroom     uint64 `json:"token_index_headroom"`
	// LeaderChanges are the latest leader changes any replica saw, newest
	// first.
	LeaderChanges []LeaderChange `json:"leader_changes"`
}

// CellReplicaHealth is one replica of a cell.
type CellReplicaHealth struct {
	Lockd   uint64 `json:"lockd"`
	Zone    string `json:"zone,omitempty"`
	Learner bool   `json:"learner,omitempty"`
	// Role as the replica answered (leader, follower, unknown), or
	// "down" when its lockd did not answer or does not run it.
	Role    string `json:"role"`
	Up      bool   `json:"up"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied_index"`
	// Behind is how many entries it has applied fewer than the leader;
	// StalledMS, when it is behind, how long its applied index has not
	// moved (as the assessing lockd has watched it).
	Behind    uint64 `json:"behind,omitempty"`
	StalledMS int64  `json:"stalled_ms,omitempty"`
}

// LeaderChange is one leader a replica saw its cell elect: when (Unix
// ms, the seeing lockd's clock), the term, the leader's replica id and
// (in a CellHealth) the lockd hosting it.
type LeaderChange struct {
	AtMS     int64  `json:"at_ms"`
	Term     uint64 `json:"term"`
	LeaderID uint64 `json:"leader_id"`
	Lockd    uint64 `json:"lockd,omitempty"`
}

// MoveHealth is a prefix move in flight.
type MoveHealth struct {
	Prefix string `json:"prefix"`
	From   string `json:"from"`
	To     string `json:"to"`
	Phase  string `json:"phase"`
	// BeganAt is the directory index of the begin.
	BeganAt uint64 `json:"began_at"`
	// SealNodes is how many nodes the sealed source holds (0 until the
	// seal is recorded); StagedNodes how many the new cell has staged of
	// the copy (-1: not known; counted up to 65 536: at that, at least).
	SealNodes   int `json:"seal_nodes"`
	StagedNodes int `json:"staged_nodes"`
	// AgeMS is how long this lockd has seen it in flight.
	AgeMS int64 `json:"age_ms"`
}

// ProxyHealth is a registered lockproxy as it answered.
type ProxyHealth struct {
	APIAddr  string            `json:"api_addr"`
	Zone     string            `json:"zone,omitempty"`
	Version  string            `json:"version,omitempty"`
	Clients  int               `json:"clients"`
	Sessions int               `json:"sessions"`
	Cells    []ProxyCellStatus `json:"cells"`
	Error    string            `json:"error,omitempty"`
}

// LockdHealth is a lockd of the directory.
type LockdHealth struct {
	ID      uint64 `json:"id"`
	APIAddr string `json:"api_addr"`
	Zone    string `json:"zone,omitempty"`
	Version string `json:"version,omitempty"`
	// Directory is "leader", "replica" or "" (hosts no directory replica).
	Directory string `json:"directory,omitempty"`
	Replicas  int    `json:"replicas"`
	// LastAnsweredMS is how long ago it last answered this lockd (-1:
	// never since this lockd started).
	LastAnsweredMS int64   `json:"last_answered_ms"`
	FsyncP99MS     float64 `json:"fsync_p99_ms"`
	Error          string  `json:"error,omitempty"`
}

// TenantHealth is a tenant's usage on each cell against its quota (a
// quota is per cell).
type TenantHealth struct {
	Name  string            `json:"name"`
	Quota Quota             `json:"quota"`
	Cells []TenantCellUsage `json:"cells"`
}

// TenantCellUsage is what a tenant holds on one cell.
type TenantCellUsage struct {
	Cell     string `json:"cell"`
	Sessions int    `json:"sessions"`
	Nodes    int    `json:"nodes"`
	Bytes    int64  `json:"bytes"`
}
