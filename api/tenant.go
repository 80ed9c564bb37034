package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Role is what a tenant may do under a granted prefix.
type Role string

const (
	// RoleRead: get, children, watches and lock state under the prefix.
	RoleRead Role = "read"
	// RoleWrite: read, and create, put and delete nodes.
	RoleWrite Role = "write"
	// RoleLock: read, and create lock nodes (Mutex, Election) and delete
	// the ones its own sessions own.
	RoleLock Role = "lock"
	// RoleAdmin: everything under the prefix; on "/", also the cluster
	// operations (cells, prefixes, migrations, membership, restores,
	// tenants) and writing or deleting another session's ephemeral nodes.
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	return r == RoleRead || r == RoleWrite || r == RoleLock || r == RoleAdmin
}

// implies reports whether holding r grants want.
func (r Role) implies(want Role) bool {
	switch r {
	case RoleAdmin:
		return true
	case RoleWrite, RoleLock:
		return want == r || want == RoleRead
	}
	return want == r
}

// Grant gives a tenant roles on every path at or under Prefix.
type Grant struct {
	Prefix string `json:"prefix"`
	Roles  []Role `json:"roles"`
}

// Quota bounds what one tenant holds on one cell (sessions, nodes and
// bytes in the state machine; watches and writes per second at the
// cell's leader). Zero fields take DefaultQuota's; a request past one is
// refused with quota_exceeded (HTTP 429) and applies nothing.
type Quota struct {
	Sessions     int   `json:"sessions,omitempty"`
	Nodes        int   `json:"nodes,omitempty"`
	Bytes        int64 `json:"bytes,omitempty"`
	Watches      int   `json:"watches,omitempty"`
	WritesPerSec int   `json:"writes_per_sec,omitempty"`
}

// DefaultQuota is a tenant's quota where its own leaves a field zero:
// a tenth of a cell's named limits, so no one tenant can fill a cell.
var DefaultQuota = Quota{
	Sessions:     MaxSessionsPerCell / 10,
	Nodes:        MaxNodesPerCell / 10,
	Bytes:        MaxBytesPerCell / 10,
	Watches:      MaxWatchesPerSession,
	WritesPerSec: 2000,
}

// Effective is q with its zero fields filled from DefaultQuota.
func (q Quota) Effective() Quota {
	d := DefaultQuota
	if q.Sessions > 0 {
		d.Sessions = q.Sessions
	}
	if q.Nodes > 0 {
		d.Nodes = q.Nodes
	}
	if q.Bytes > 0 {
		d.Bytes = q.Bytes
	}
	if q.Watches > 0 {
		d.Watches = q.Watches
	}
	if q.WritesPerSec > 0 {
		d.WritesPerSec = q.WritesPerSec
	}
	return d
}

// Tenant is a team using the service: its grants, its quota, and the
// SHA-256 digests of its API tokens (the tokens themselves are shown
// once, when made, and never stored).
type Tenant struct {
	Name   string   `json:"name"`
	Grants []Grant  `json:"grants,omitempty"`
	Quota  Quota    `json:"quota,omitempty"`
	Tokens []string `json:"tokens,omitempty"`
}

// MaxTenantName bounds a tenant's name.
const MaxTenantName = 64

// BootstrapAdmin is the name the lockds' bootstrap admin token acts
// under (a lockproxy's own sessions and nodes are recorded as its): no
// tenant may take it.
const BootstrapAdmin = "admin"

// CheckNewName refuses a name a new tenant may not take (the bootstrap
// admin's, or one with a NUL): checked where a tenant change is proposed,
// never in apply, so that a log written before the rule replays alike.
func CheckNewName(name string) error {
	if name == BootstrapAdmin || strings.ContainsRune(name, 0) {
		return Errorf(CodeBadRequest, "tenant name %q is reserved (the bootstrap admin's) or holds a NUL", name)
	}
	return nil
}

// Validate checks a tenant's name, grants and quota. The directory's
// state machine applies it: it must never refuse what it once took.
func (t Tenant) Validate() error {
	if t.Name == "" || len(t.Name) > MaxTenantName || strings.ContainsAny(t.Name, "/ \t\n") {
		return Errorf(CodeBadRequest, "tenant name %q: 1 to %d characters, no slash or space", t.Name, MaxTenantName)
	}
	for _, g := range t.Grants {
		if g.Prefix != "/" {
			if err := ValidatePath(g.Prefix); err != nil {
				return Errorf(CodeInvalidPath, "grant prefix %q: %v", g.Prefix, err)
			}
		}
		if len(g.Roles) == 0 {
			return Errorf(CodeBadRequest, "grant on %s names no role", g.Prefix)
		}
		for _, r := range g.Roles {
			if !r.Valid() {
				return Errorf(CodeBadRequest, "role %q: use read, write, lock or admin", r)
			}
		}
	}
	q := t.Quota
	if q.Sessions < 0 || q.Nodes < 0 || q.Bytes < 0 || q.Watches < 0 || q.WritesPerSec < 0 {
		return Errorf(CodeBadRequest, "negative quota")
	}
	return nil
}

// Allows reports whether the tenant holds role on path: some grant on a
// prefix of path (as whole segments) has a role implying it.
func (t Tenant) Allows(role Role, path string) bool {
	for _, g := range t.Grants {
		if !Covers(g.Prefix, path) {
			continue
		}
		for _, r := range g.Roles {
			if r.implies(role) {
				return true
			}
		}
	}
	return false
}

// GrantRoot is the shortest prefix on which the tenant holds role over
// path: the highest node a request of that role on path may reach
// (make_parents creates ancestors only at or below it). ok is false if
// the tenant does not hold role on path.
func (t Tenant) GrantRoot(role Role, path string) (root string, ok bool) {
	for _, g := range t.Grants {
		if !Covers(g.Prefix, path) || (ok && len(g.Prefix) >= len(root)) {
			continue
		}
		for _, r := range g.Roles {
			if r.implies(role) {
				root, ok = g.Prefix, true
				break
			}
		}
	}
	return root, ok
}

// IsAdmin reports whether the tenant holds admin on "/": the cluster's
// operations are its.
func (t Tenant) IsAdmin() bool { return t.Allows(RoleAdmin, "/") }

// Covers reports whether path is prefix or lies under it (whole segments:
// /pay does not cover /payments).
func Covers(prefix, path string) bool {
	if prefix == "/" || prefix == path {
		return true
	}
	return strings.HasPrefix(path, prefix) && len(path) > len(prefix) && path[len(prefix)] == '/'
}

// TokenDigest is the hex SHA-256 of a token: what the directory stores.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// BearerToken extracts the token of an Authorization header value.
func BearerToken(header string) (string, error) {
	if header == "" {
		return "", nil
	}
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return "", fmt.Errorf("authorization header is not \"Bearer <token>\"")
	}
	return tok, nil
}

// TenantRequest changes a tenant (RouteAdminTenant). Put creates or
// replaces it (grants and quota; its tokens are kept); NewToken also
// makes a token, returned once in the reply; Revoke drops every token;
// Delete removes the tenant.
type TenantRequest struct {
	Action   string `json:"action"` // put, delete, revoke
	Tenant   Tenant `json:"tenant"`
	NewToken bool   `json:"new_token,omitempty"`
}

// Tenant actions.
const (
	TenantPut    = "put"
	TenantDelete = "delete"
	TenantRevoke = "revoke"
)

// TenantResponse answers a tenant change: the tenant as stored (token
// digests left out) and, when asked for, the new token.
type TenantResponse struct {
	Tenant Tenant `json:"tenant"`
	Token  string `json:"token,omitempty"`
	Index  uint64 `json:"index"`
}

// TenantsResponse lists the tenants (token digests left out, their count kept).
type TenantsResponse struct {
	Tenants []TenantInfo `json:"tenants"`
	// Auth is whether the answering lockd requires tokens.
	Auth bool `json:"auth"`
}

// TenantInfo is a tenant as listed.
type TenantInfo struct {
	Name   string  `json:"name"`
	Grants []Grant `json:"grants,omitempty"`
	Quota  Quota   `json:"quota"` // effective
	Tokens int     `json:"tokens"`
}
