// Package audit writes the operator's audit log of a lockd: one structured
// record per change that matters on a shared cluster (tenants, grants and
// tokens, prefix moves, restores, cells, membership, backups, an admin's
// delete of another session's node, refused admin requests), naming who
// asked, what, when and the result. Records go to log/slog (attribute
// audit=true) and, optionally, to a JSON-lines file rotated by size.
//
// A record never holds a secret: a token is named by its id (a prefix of
// its SHA-256 digest, TokenID), a session by its number, and a refusal by
// its error code only (a message could echo what the caller sent).
package audit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// Action is what a record is about.
type Action string

// The actions recorded. Step refines some: a tenant change's action
// (put, delete, revoke), a move's step (begin, sealed, commit, end,
// abort), a membership change's (add, promote, remove).
const (
	ActTenant        Action = "tenant"         // a tenant made, changed (grants, quota) or deleted
	ActTokenIssue    Action = "token.issue"    // a new API token made for a tenant
	ActTokenRevoke   Action = "token.revoke"   // every token of a tenant revoked
	ActTenantCommit  Action = "tenant.commit"  // a tenant change a lockd relayed to a directory replica
	ActMove          Action = "prefix.move"    // one step of a prefix's move between cells
	ActPrefixAssign  Action = "prefix.assign"  // a prefix assigned to a cell
	ActRestore       Action = "cell.restore"   // a cell's restore planned
	ActCellCreate    Action = "cell.create"    // a cell created
	ActMember        Action = "member.change"  // a replica added, promoted or removed
	ActMemberRecord  Action = "member.record"  // a membership step recorded in the directory
	ActLockdRegister Action = "lockd.register" // a lockd joined the directory
	ActProxyRegister Action = "proxy.register" // a lockproxy registered
	ActBackup        Action = "backup"         // a cell exported to the backup store
	ActSnapshot      Action = "snapshot"       // a replica's snapshot saved
	ActTransfer      Action = "leader.transfer"
	ActNodeDelete    Action = "node.delete_other" // an admin deleted another session's ephemeral node
	ActAdminRoute    Action = "admin.route"       // an admin route refused before it was known what it would do
)

// ResultOK is a record's Result for a change that was made.
const ResultOK = "ok"

// Bounds on what a record copies from a request.
const (
	// MaxField bounds every string a record copies from a request or a
	// connection (a name, a path, an address, a claimed address).
	MaxField = 256
	// TokenIDLen is the length of a token's id: hex digits of its digest.
	TokenIDLen = 16
)

// Actor is who asked for a change.
type Actor struct {
	Tenant      string // the authenticated tenant ("" with auth off)
	TokenID     string // the token's id (TokenID), never the token
	Admin       bool   // the principal holds the admin role
	CertSubject string // the client certificate's subject, with mutual TLS
	Session     uint64 // the session the request named, if any
	ClientAddr  string // the connection's peer address
	// ClaimedClient is the client address a lockproxy says it forwards
	// for (api.HeaderClientAddr): a claim, not checked; ClientAddr is then
	// the proxy's.
	ClaimedClient string
	// Lockd is the lockd itself, for a change it made on its own (a
	// periodic backup, a leadership balance).
	Lockd uint64
}

// Target is what a change was made to; fields not concerned are empty.
type Target struct {
	Tenant   string   // a tenant's name
	Grants   []string // a tenant's grants as PREFIX=ROLE+ROLE
	TokenID  string   // the id of a token made by the change
	Prefix   string   // a top-level prefix
	Cell     string   // a cell's name
	To       string   // a move's destination cell, or a transfer's lockd
	Lockd    uint64   // a membership change's lockd, a registering lockd
	Path     string   // a node's path
	Owner    uint64   // the session owning the deleted node
	Index    uint64   // the directory's (or the cell's) index of the change
	Location string   // where a backup went
	Name     string   // a lockproxy's name
}

// Record is one audit record.
type Record struct {
	Time   time.Time
	Action Action
	Step   string
	Who    Actor
	Target Target
	// Result is ResultOK or the refusal's error code.
	Result string
	// Unrecorded counts refusals left out, by RefusalsPerSecond, since
	// the previous refusal recorded.
	Unrecorded int
}

// TokenID names token in a record: the first TokenIDLen hex digits of its
// digest (what the directory stores), never the token itself.
func TokenID(token string) string {
	if token == "" {
		return ""
	}
	return api.TokenDigest(token)[:TokenIDLen]
}

// Clip bounds s to MaxField bytes.
func Clip(s string) string {
	if len(s) > MaxField {
		return s[:MaxField]
	}
	return s
}

// Options configure a Log's file; Path "" writes none.
type Options struct {
	Path     string
	MaxBytes int64 // rotate before a write would pass it; 0: DefaultMaxBytes
	Keep     int   // rotated files kept (PATH.1 … PATH.Keep); 0: DefaultKeep
}

// Log writes audit records. A nil *Log records nothing.
type Log struct {
	log      *slog.Logger
	file     *rotator // nil: no file
	refusals refusalWindow
	mu       sync.Mutex // orders file writes
	now      func() time.Time
}

// New makes a Log writing to log (with audit=true on every record) and,
// with o.Path set, to that file.
func New(log *slog.Logger, o Options) (*Log, error) {
	if log == nil {
		log = slog.Default()
	}
	l := &Log{log: log.With("audit", true), now: time.Now}
	if o.Path != "" {
		f, err := openRotator(o)
		if err != nil {
			return nil, err
		}
		l.file = f
	}
	return l, nil
}

// Record writes r, timed now if r.Time is zero. A refusal (Result not
// ResultOK) past RefusalsPerSecond is counted, not written.
func (l *Log) Record(r Record) {
	if l == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = l.now()
	}
	if r.Result != ResultOK {
		ok, skipped := l.refusals.allow(r.Time)
		if !ok {
			return
		}
		r.Unrecorded = skipped
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", attrs(r)...)
	if l.file == nil {
		return
	}
	line, err := encodeLine(r)
	if err == nil {
		l.mu.Lock()
		err = l.file.write(line)
		l.mu.Unlock()
	}
	if err != nil {
		l.log.Warn("audit file write failed", "err", err)
	}
}

// Close closes the file, if any; later records go to the log only.
func (l *Log) Close() error {
	if l == nil || l.file == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.close()
}
