package api

// HTTP routes. Every request and response body is JSON. Node and session
// routes take POST; status, directory, health and metrics take GET.
const (
	RouteSessionOpen      = "/v1/session/open"
	RouteSessionKeepAlive = "/v1/session/keepalive"
	RouteSessionClose     = "/v1/session/close"
	// RouteKeepAliveBatch renews many sessions in one call: a lockproxy's
	// KeepAlive for all its clients' sessions on one cell.
	RouteKeepAliveBatch = "/v1/session/keepalive/batch"
	RouteCreate         = "/v1/node/create"
	RoutePut            = "/v1/node/put"
	RouteDelete         = "/v1/node/delete"
	RouteGet            = "/v1/node/get"
	RouteChildren       = "/v1/node/children"
	RouteLockState      = "/v1/lock/state"
	RouteWatch          = "/v1/watch"
	RouteStatus         = "/v1/status"
	RouteDirectory      = "/v1/directory"
	RouteHealth         = "/healthz"
	RouteMetrics        = "/metrics"
	// RouteAdminSnapshot makes the replica it is sent to save a snapshot.
	RouteAdminSnapshot = "/v1/admin/snapshot"
	// RouteAdminBackup makes a cell's leader export a snapshot to the
	// backup store.
	RouteAdminBackup = "/v1/admin/backup"
	// Directory administration, answered by the directory group.
	RouteAdminCellCreate   = "/v1/admin/cell/create"
	RouteAdminPrefixAssign = "/v1/admin/prefix/assign"
	RouteAdminRegister     = "/v1/admin/lockd/register"
	RouteAdminMigrate      = "/v1/admin/migrate"
	RouteAdminMember       = "/v1/admin/member"
	// RouteAdminRestore plans a cell's rebuild from a backup (lockctl
	// restore); lockd restore then imports it on each planned lockd.
	RouteAdminRestore = "/v1/admin/cell/restore"
	// RouteAdminTransfer makes a cell's leader hand leadership to the
	// replica on another lockd (leader balancing).
	RouteAdminTransfer = "/v1/admin/transfer"
	// RouteAdminPrefixOp is a migration step on one cell's leader.
	RouteAdminPrefixOp = "/v1/admin/prefix/op"
	// RouteAdminProxyRegister records a lockproxy in the directory.
	RouteAdminProxyRegister = "/v1/admin/proxy/register"
	// RouteAdminTenant creates, changes or deletes a tenant (admin);
	// RouteAdminTenants (GET) lists them; RouteAdminTenantCommit is a
	// lockd's forward of a tenant change to a directory replica.
	RouteAdminTenant = "/v1/admin/tenant"
	// RouteStatusPage (GET) is the status page: plain HTML and JS that
	// reads RouteStatusHealth (GET: the cluster assessed by the lockd
	// asked) and RouteLockQueue (a lock's holders and waiters);
	// RouteStatusCluster (GET) is every lockd's status, gathered by the
	// lockd asked.
	RouteStatusPage    = "/status"
	RouteStatusCluster = "/v1/status/cluster"
	RouteLockQueue     = "/v1/lock/queue"
	// RouteLockCheck answers whether a fencing token is a current holder's
	// (Chubby's CheckSequencer), for resources that cannot keep a
	// high-water mark of their own.
	RouteLockCheck         = "/v1/lock/check"
	RouteAdminTenants      = "/v1/admin/tenants"
	RouteAdminTenantCommit = "/v1/admin/tenant/commit"
	// RouteAdminMemberRecord is a cell leader's forward of one step of a
	// membership change (RouteAdminMember) to a directory replica, when
	// its own lockd holds none: the step is recorded in the directory
	// only; the cell's Raft group is the forwarding lockd's to change.
	RouteAdminMemberRecord = "/v1/admin/member/record"

	// HeaderAuth carries the caller's auth token ("Bearer <token>") on every
	// request. Accepted and logged now; enforced once tenants exist.
	HeaderAuth = "Authorization"

	// HeaderWaitLeaderMS lets a replica hold a request up to this many
	// milliseconds (at most MaxLeaderWait) while the cell has no leader it
	// can use — none known, only the one in HeaderUnreachable, or itself
	// still starting — and answer once that changes: a fail-over costs the
	// client the election, not the election plus its backoff. Without it a
	// replica answers at once.
	HeaderWaitLeaderMS = "Lockd-Wait-Leader-Ms"
	// HeaderUnreachable names the API addresses (comma-separated) the
	// client failed to reach during this call and that have not answered
	// since: a dead leader other replicas may still name, and perhaps a
	// dead follower with it.
	HeaderUnreachable = "Lockd-Unreachable"
	// HeaderCell names the cell a path request is for, as the client's
	// directory routes it; without it the lockd routes by its own view.
	// Either way the cell's state decides (moved, wrong_cell).
	HeaderCell = "Lockd-Cell"
	// HeaderForwarded marks a request one lockd makes to another for its
	// own client (the status page's lock queue): it is not forwarded again.
	HeaderForwarded = "Lockd-Forwarded"
	// HeaderClientAddr is the client address a lockproxy forwards a
	// request for (the lockd sees the proxy's): the audit log records it
	// as claimed, never as checked. At most api.MaxClientAddrHeader bytes
	// are kept.
	HeaderClientAddr = "Lockd-Client-Addr"
	// HeaderResendable ("1") says the client would resend this request
	// itself after a lost reply: a read, or a write under a session's
	// request id (the cell applies it once, however often it arrives). A
	// lockproxy forwarding it then resends it to another replica when
	// the one it tried hung or failed (and watches its attempt for a
	// hung leader, sdk.Config.HungAfter), within the client's budget,
	// instead of answering unavailable. A client that sets it on a write
	// without a request id may have that write applied twice: its own.
	HeaderResendable = "Lockd-Resendable"
)

// MaxClientAddrHeader bounds the HeaderClientAddr value a lockd keeps.
const MaxClientAddrHeader = 128

// ErrorResponse is the body of every non-2xx reply.
type ErrorResponse struct {
	Error *Error `json:"error"`
}
