package cell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
)

// Caller is who sent a request, as the API's authentication found: the
// tenant and its quota go into the entry (the state counts and refuses
// per tenant), Admin lets it change another session's ephemeral node.
// The zero Caller is an unauthenticated one with auth off.
type Caller struct {
	Tenant string
	Quota  *api.Quota
	Admin  bool
	// OwnOnly: the caller holds only the lock role here, so may change
	// or delete only its own session's ephemeral nodes.
	OwnOnly bool
	// ParentsFrom: the caller's grant root on the path (fsm.Command's).
	ParentsFrom string
}

func (k Caller) stamp(cmd *fsm.Command) *fsm.Command {
	cmd.Tenant, cmd.Quota, cmd.Admin, cmd.OwnOnly, cmd.ParentsFrom = k.Tenant, k.Quota, k.Admin, k.OwnOnly, k.ParentsFrom
	return cmd
}

// newSecret draws a session secret: 128 random bits, hex.
func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("cell: no randomness for a session secret: %v", err)) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// OpenSession opens a session. Its secret is drawn here, on the
// proposer, and goes into the entry (apply draws nothing).
func (c *Cell) OpenSession(ctx context.Context, req api.OpenSessionRequest, who Caller) (api.SessionResponse, error) {
	lease := req.LeaseMS
	if lease <= 0 {
		lease = c.cfg.DefaultLease.Milliseconds()
	}
	cmd := &fsm.Command{Op: fsm.OpOpenSession, LeaseMS: lease, Nonce: req.Nonce, WriteHeader: api.WriteHeader{Secret: newSecret()}}
	res, err := c.propose(ctx, who.stamp(cmd))
	if err != nil {
		return api.SessionResponse{}, err
	}
	return api.SessionResponse{Session: res.Session, Secret: res.Secret, LeaseMS: res.LeaseMS, Epoch: res.Epoch, Index: res.Index,
		KeepAliveMS: c.cfg.KeepAlive.Milliseconds(), GraceMS: c.cfg.Grace.Milliseconds()}, nil
}

// CheckSecret refuses a request naming a session without its secret
// (unauthorized). A session this replica does not know passes: the
// operation reports it as it always has (no_session, session_expired).
// A secret never changes, so this replica's applied state is enough.
func (c *Cell) CheckSecret(session uint64, secret string) error {
	if session == 0 {
		return nil
	}
	return c.checkSecrets([]uint64{session}, []string{secret}, nil)[0]
}

// RenewCheck decides whether a session a tenant opened may be renewed
// (nil error) or is refused (the error answers its KeepAlive).
type RenewCheck func(tenant string) error

// checkSecrets checks sessions' secrets (parallel slices), and with renew
// their tenants, on this replica's state: an error per session.
func (c *Cell) checkSecrets(sessions []uint64, secrets []string, renew RenewCheck) []error {
	errs, err := readLocal(c, secretQuery{sessions: sessions, secrets: secrets, renew: renew}.run)
	if err != nil {
		errs := make([]error, len(sessions))
		for i := range errs {
			errs[i] = raftError(err)
		}
		return errs
	}
	return errs
}

// KeepAlive renews a session and long-polls for its events. The reply is
// sent only after a ReadIndex round confirms this replica still leads under
// the same epoch, so a deposed leader can never extend a lease the new
// leader does not know about. Events leave the session's queue only when a
// later KeepAlive acknowledges them, so a reply that never reaches its
// client loses nothing.
//
// renew, if not nil, decides whether the session's tenant may have it
// renewed (its caller's, and a tenant that still has a token): a refusal
// leaves the lease to run out.
func (c *Cell) KeepAlive(ctx context.Context, req api.KeepAliveRequest, renew RenewCheck) (api.SessionResponse, error) {
	if err := c.checkSecrets([]uint64{req.Session}, []string{req.Secret}, renew)[0]; err != nil {
		return api.SessionResponse{}, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	_, epoch := c.sessions.Active()
	r, err := c.sessions.Renew(ctx, req.Session, wait, session.Ack{Epoch: req.AckEpoch, Seq: req.AckSeq})
	return c.keepAliveReply(ctx, req.Session, epoch, len(r.Events) > 0 || wait <= 0, r, err)
}

// KeepAliveAsync is KeepAlive whose long poll holds no goroutine (a
// leader with many sessions held straight on it pays no stack for each):
// a reply ready at once is returned with parked false; otherwise the call
// is parked and done gets the reply, from a goroutine of its own, once the
// session has events or its wait is over. ctx bounds what is done before
// it parks, and done's own ReadIndex round runs within its deadline.
func (c *Cell) KeepAliveAsync(ctx context.Context, req api.KeepAliveRequest, renew RenewCheck, done func(api.SessionResponse, error)) (api.SessionResponse, bool, error) {
	if err := c.checkSecrets([]uint64{req.Session}, []string{req.Secret}, renew)[0]; err != nil {
		return api.SessionResponse{}, false, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	_, epoch := c.sessions.Active()
	r, parked, err := c.sessions.RenewAsync(ctx, req.Session, wait, session.Ack{Epoch: req.AckEpoch, Seq: req.AckSeq}, func(r session.Renewal, err error) {
		// After its wait: no ErrUnknown (the lease existed), so no read.
		done(c.keepAliveReply(context.Background(), req.Session, epoch, len(r.Events) > 0, r, err))
	})
	if parked {
		return api.SessionResponse{}, true, nil
	}
	resp, err := c.keepAliveReply(ctx, req.Session, epoch, len(r.Events) > 0 || wait <= 0, r, err)
	return resp, false, err
}

// keepAliveReply is a KeepAlive's reply once the session manager renewed
// its lease (r, err): without a lease, the state is asked whether the
// session ever existed; else one ReadIndex round (urgent: at once, else
// shared with other replies) confirms this replica still leads.
func (c *Cell) keepAliveReply(ctx context.Context, id, epoch uint64, urgent bool, r session.Renewal, err error) (api.SessionResponse, error) {
	if errors.Is(err, session.ErrUnknown) {
		// The manager has no lease: ask the state whether it ever existed.
		if _, rerr := read(ctx, c, sessionQuery{session: id, epoch: epoch}.run); rerr != nil {
			return api.SessionResponse{}, rerr
		}
		return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "session %d not yet known to the leader", id)
	}
	if err != nil {
		return api.SessionResponse{}, err
	}
	// Events (a hand-off, a watch) go out at once; an idle reply shares a
	// ReadIndex round with others (confirm.go). The caller's ctx may be
	// spent by the long poll; every round ends within its own deadline, so
	// waiting for it needs no timer of its own (one less per KeepAlive).
	index, err := c.confirms.confirm(context.Background(), id, r.Epoch, urgent)
	if err != nil {
		return api.SessionResponse{}, err
	}
	return api.SessionResponse{Session: id, LeaseMS: r.Lease.Milliseconds(), Epoch: r.Epoch, Index: index, Events: r.Events}, nil
}

// KeepAliveBatch renews a lockproxy's sessions on this cell in one call
// and long-polls for their events (session.Manager.RenewBatch). As with
// KeepAlive, it answers only after one ReadIndex round, started after
// the leases were extended, confirms this replica still leads under the
// same epoch and that each session is live.
func (c *Cell) KeepAliveBatch(ctx context.Context, req api.KeepAliveBatchRequest, renew RenewCheck) (api.KeepAliveBatchResponse, error) {
	entries, err := batchEntries(req)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	entries, denied, err := c.checkBatchSecrets(req, entries, renew)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxBatchWait)
	r, err := c.sessions.RenewBatch(ctx, req.Proxy, req.Epoch, entries, wait)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	// Renewed sessions are confirmed, and the state is asked about those
	// without a lease (ended, or not yet known to this leader), in one
	// round; a batch that renewed nothing (a poll for events) needs none.
	if len(r.Renewed)+len(r.Unknown) == 0 {
		return api.KeepAliveBatchResponse{Epoch: r.Epoch, Index: c.appliedIndex(), Sessions: append(r.Reports, denied...)}, nil
	}
	checks := make([]sessionCheck, 0, len(r.Renewed)+len(r.Unknown))
	for _, id := range r.Renewed {
		checks = append(checks, sessionCheck{id, r.Epoch})
	}
	for _, id := range r.Unknown {
		checks = append(checks, sessionCheck{id, r.Epoch})
	}
	urgent := wait <= 0
	for _, rep := range r.Reports {
		urgent = urgent || len(rep.Events) > 0
	}
	cr := c.confirms.confirmAll(context.Background(), checks, urgent)
	if cr.err != nil {
		return api.KeepAliveBatchResponse{}, cr.err
	}
	resp := api.KeepAliveBatchResponse{Epoch: r.Epoch, Index: cr.index}
	failed := map[uint64]*api.Error{}
	for i, chk := range checks {
		switch err := cr.errs[i]; {
		case errors.Is(err, errNotLeading):
			return api.KeepAliveBatchResponse{}, api.Errorf(api.CodeNotLeader, "leadership changed during the keepalive batch")
		case err != nil:
			failed[chk.session] = api.AsError(err)
		case i >= len(r.Renewed):
			failed[chk.session] = api.Errorf(api.CodeUnavailable, "session %d not yet known to the leader", chk.session)
		}
	}
	for _, rep := range r.Reports {
		if _, ok := failed[rep.Session]; !ok {
			resp.Sessions = append(resp.Sessions, rep)
		}
	}
	for id, err := range failed {
		resp.Sessions = append(resp.Sessions, api.BatchSession{Session: id, Error: err})
	}
	resp.Sessions = append(resp.Sessions, denied...)
	return resp, nil
}

// checkBatchSecrets drops from a batch the sessions whose secret it does
// not carry (each answered unauthorized, and not renewed).
func (c *Cell) checkBatchSecrets(req api.KeepAliveBatchRequest, entries []session.BatchEntry, renew RenewCheck) ([]session.BatchEntry, []api.BatchSession, error) {
	secrets := req.Secrets
	if len(secrets) != len(req.Sessions) {
		if len(secrets) != 0 {
			return nil, nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions but %d secrets", len(req.Sessions), len(secrets))
		}
		secrets = make([]string, len(req.Sessions)) // an older proxy: only sessions without a secret pass
	}
	errs, err := readLocal(c, secretQuery{sessions: req.Sessions, secrets: secrets, renew: renew}.run)
	if err != nil {
		return nil, nil, raftError(err)
	}
	var denied []api.BatchSession
	kept := entries[:0:0]
	for i, e := range entries {
		if errs[i] != nil {
			denied = append(denied, api.BatchSession{Session: e.Session, Error: api.AsError(errs[i])})
			continue
		}
		kept = append(kept, e)
	}
	if len(denied) == 0 {
		return entries, nil, nil
	}
	return kept, denied, nil
}

// batchEntries checks a batch request and turns it into the manager's entries.
func batchEntries(req api.KeepAliveBatchRequest) ([]session.BatchEntry, error) {
	if req.Proxy == "" {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: no proxy name")
	}
	if len(req.Sessions) != len(req.AgeMS) {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions but %d ages", len(req.Sessions), len(req.AgeMS))
	}
	if len(req.Sessions) > api.MaxBatchSessions {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions, at most %d", len(req.Sessions), api.MaxBatchSessions)
	}
	entries := make([]session.BatchEntry, len(req.Sessions))
	at := make(map[uint64]int, len(req.Acks))
	for i, id := range req.Sessions {
		if id == 0 || req.AgeMS[i] < 0 {
			return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: session %d with age %d ms", id, req.AgeMS[i])
		}
		entries[i] = session.BatchEntry{Session: id, Age: time.Duration(req.AgeMS[i]) * time.Millisecond}
		at[id] = i
	}
	for _, a := range req.Acks {
		i, ok := at[a.Session]
		if !ok {
			return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: an ack for session %d, which it does not renew", a.Session)
		}
		e := &entries[i]
		e.Ack, e.Seen, e.New = session.Ack{Epoch: a.AckEpoch, Seq: a.AckSeq}, a.Seen, a.New
	}
	return entries, nil
}

// CloseSession ends a session.
func (c *Cell) CloseSession(ctx context.Context, req api.CloseSessionRequest) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpCloseSession, WriteHeader: api.WriteHeader{Session: req.Session, Secret: req.Secret},
		AtMS: time.Now().UnixMilli()})
	return err
}
