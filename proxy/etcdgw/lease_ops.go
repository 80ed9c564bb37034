package etcdgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Lease operations: grant, open a session, renew, close. Network calls
// never run under the table's mu; a lease's op serializes its own.

// grant makes a lease for the caller: id 0 draws one, else id must be
// free for this credential. ttl is clamped (clampTTL).
func (t *leaseTable) grant(w who, id, ttl int64) (*lease, error) {
	if id < 0 {
		return nil, errBadLeaseID
	}
	if foreignLease(id, t.tag) {
		// It would be forwarded to the gateway its tag names, which
		// never granted it.
		return nil, errForeignLeaseID
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := digestOf(w)
	if len(t.leases) >= MaxLeases {
		return nil, errTooMany("MaxLeases", MaxLeases, "leases at this gateway")
	}
	if t.perCred[d] >= MaxLeasesPerCredential {
		return nil, errTooMany("MaxLeasesPerCredential", MaxLeasesPerCredential, "leases of one credential")
	}
	if id == 0 {
		id = t.freeIDLocked(d)
		if id == 0 {
			return nil, errTooMany("maxIDDraws", maxIDDraws, "draws for a free lease id")
		}
	} else if l := t.leases[leaseKey{d, id}]; l != nil && !l.gone {
		return nil, rpctypes.ErrGRPCLeaseExist
	}
	l := &lease{key: leaseKey{d, id}, token: w.token, ttl: clampTTL(ttl), lastKA: t.now(), sessions: map[string]*leaseSession{}}
	t.leases[l.key] = l
	t.perCred[d]++
	return l, nil
}

// freeIDLocked draws an id free for digest d (0: none found).
func (t *leaseTable) freeIDLocked(d string) int64 {
	for range maxIDDraws {
		id := newLeaseID(t.tag)
		if t.leases[leaseKey{d, id}] == nil {
			return id
		}
	}
	return 0
}

// open opens l's session on p's cell (l.op held): LeaseMS the lease's
// TTL, a fresh nonce so a retry of an unknown outcome gets the same
// session.
func (t *leaseTable) open(ctx context.Context, w who, l *lease, p PrefixInfo) error {
	t.mu.Lock()
	n := len(l.sessions)
	t.mu.Unlock()
	if n >= MaxSessionsPerLease {
		return errTooMany("MaxSessionsPerLease", MaxSessionsPerLease, "cells one lease has keys on")
	}
	req := api.OpenSessionRequest{Cell: p.Cell, LeaseMS: l.ttl * 1000, Nonce: newNonce()}
	var resp api.SessionResponse
	var sent time.Time
	var err error
	for range maxOpenAttempts {
		sent = t.now()
		cctx, cancel := context.WithTimeout(ctx, leaseCallTimeout)
		err = t.be.Call(cctx, w.token, api.RouteSessionOpen, req, &resp)
		cancel()
		if err == nil || knownRefusal(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	s := &leaseSession{ref: sessionRef{p.Cell, resp.Session}, secret: resp.Secret,
		until: sessionUntil(sent, resp.LeaseMS, 0), prefixes: []string{p.Prefix}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.gone {
		// Dropped meanwhile (expired): nobody renews the new session,
		// which ends by its own lease at the cell.
		return errLeaseNotFound
	}
	l.sessions[p.Cell] = s
	t.bySession[s.ref] = l.key.id
	return nil
}

// knownRefusal reports whether err is a refusal known not to have
// applied (an *api.Error).
func knownRefusal(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae)
}

// sessionLost reports whether err says the session has ended.
func sessionLost(err error) bool {
	c := api.CodeOf(err)
	return c == api.CodeSessionExpired || c == api.CodeNoSession
}

// newNonce is a fresh random open nonce.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// renew is a client's KeepAlive of id: every session of the lease is
// renewed through the proxy's KeepAlive path (WaitMS 0), and the TTL
// left is answered (lease_ttl.go); 0 if the lease is unknown here, bound
// to another credential, or lost (a session ended: the lease is
// dropped and its other sessions closed, as etcd's lease would be gone).
func (t *leaseTable) renew(ctx context.Context, w who, id int64) int64 {
	l, err := t.lookup(w, id)
	if err != nil {
		return 0
	}
	l.op.Lock()
	defer l.op.Unlock()
	t.mu.Lock()
	if l.gone {
		t.mu.Unlock()
		return 0
	}
	l.lastKA = t.now()
	sessions := make([]*leaseSession, 0, len(l.sessions))
	for _, s := range l.sessions {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	lost := false
	for _, s := range sessions {
		lost = !t.renewSession(ctx, l, s) || lost
	}
	t.mu.Lock()
	now, until := t.now(), l.untilLocked()
	if lost || !until.After(now) {
		t.dropLocked(l)
		t.mu.Unlock()
		_ = t.closeSessions(ctx, l)
		return 0
	}
	t.mu.Unlock()
	if mutant.On(mutant.EtcdLeaseTTL) {
		return l.ttl // the requested TTL, not what is left
	}
	return ttlLeft(until, now)
}

// renewSession renews one session; false if it has ended. A failure of
// unknown outcome leaves its guarantee as it was.
func (t *leaseTable) renewSession(ctx context.Context, l *lease, s *leaseSession) bool {
	req := api.KeepAliveRequest{Cell: s.ref.cell, Session: s.ref.id, Secret: s.secret, WaitMS: 0}
	var resp api.SessionResponse
	sent := t.now()
	cctx, cancel := context.WithTimeout(ctx, leaseCallTimeout)
	err := t.be.Call(cctx, l.token, api.RouteSessionKeepAlive, req, &resp)
	cancel()
	if err != nil {
		return !sessionLost(err)
	}
	u := sessionUntil(sent, resp.LeaseMS, resp.LeaseAgeMS)
	t.mu.Lock()
	if u.After(s.until) {
		s.until = u
	}
	t.mu.Unlock()
	return true
}

// closeSessions closes every session of l (l out of the table, or being
// revoked: l.op held); a session closed or already ended goes from l.
// The first failure of another kind is returned: the rest end by their
// own leases (nobody renews them).
func (t *leaseTable) closeSessions(ctx context.Context, l *lease) error {
	t.mu.Lock()
	sessions := make([]*leaseSession, 0, len(l.sessions))
	for _, s := range l.sessions {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	var first error
	for _, s := range sessions {
		cctx, cancel := context.WithTimeout(ctx, leaseCallTimeout)
		err := t.be.Call(cctx, l.token, api.RouteSessionClose,
			api.CloseSessionRequest{Cell: s.ref.cell, Session: s.ref.id, Secret: s.secret}, &struct{}{})
		cancel()
		if err != nil && !sessionLost(err) {
			if first == nil {
				first = err
			}
			continue
		}
		t.mu.Lock()
		delete(l.sessions, s.ref.cell)
		delete(t.bySession, s.ref)
		t.mu.Unlock()
	}
	return first
}

// revoke ends the caller's lease id: every session closed (their keys
// go), the lease forgotten. A close that failed keeps the lease with the
// sessions left, so a retried Revoke finishes.
func (t *leaseTable) revoke(ctx context.Context, w who, id int64) error {
	l, err := t.lookup(w, id)
	if err != nil {
		return err
	}
	l.op.Lock()
	defer l.op.Unlock()
	if err := t.closeSessions(ctx, l); err != nil {
		return err
	}
	t.mu.Lock()
	t.dropLocked(l)
	t.mu.Unlock()
	return nil
}
