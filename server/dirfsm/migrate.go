package dirfsm

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// migrate is one step of a prefix move. Every step is idempotent, and
// commit and abort exclude each other: whichever the directory applies
// first decides the move. One driver (a client, named by the random
// nonce it sends) drives a migration at a time: a begin from another is
// refused unless it takes over, and from a take-over on the previous
// driver's steps are refused, so it stops.
func (s *State) migrate(r *api.MigrateRequest, atMS int64) Result {
	p, ok := s.prefixes[r.Prefix]
	if !ok {
		return refuse(api.CodeNotFound, "no prefix %s in the directory", r.Prefix)
	}
	if len(r.Driver) > api.MaxMigrationDriver {
		return refuse(api.CodeBadRequest, "a migration driver's name is at most %d bytes, not %d", api.MaxMigrationDriver, len(r.Driver))
	}
	m := p.Migration
	if r.Action != api.MigrateBegin && m != nil && r.BeganAt != m.BeganAt {
		return refuse(api.CodeConflict, "the migration of %s in flight began at directory index %d, not %d: a step of another migration", r.Prefix, m.BeganAt, r.BeganAt)
	}
	switch r.Action {
	case api.MigrateBegin:
		return s.migrateBegin(p, r, atMS)
	case api.MigrateSealed:
		if m == nil || m.Phase != api.MigrationSealing {
			return refuse(api.CodeConflict, "no migration of %s is sealing", r.Prefix)
		}
		if res, ok := notDriver(m, r); !ok {
			return res
		}
		if m.SealDigest != "" && (m.SealDigest != r.Digest || m.SealNodes != r.Nodes) {
			return refuse(api.CodeConflict, "the seal of %s was recorded with %d nodes (%s); this one says %d nodes (%s)", r.Prefix, m.SealNodes, m.SealDigest, r.Nodes, r.Digest)
		}
		if m.SealIndex == 0 { // a seal repeated by a driver taking over applies at a later index
			m.SealIndex = r.SealIndex
		}
		m.SealNodes, m.SealDigest = r.Nodes, r.Digest
	case api.MigrateCommit:
		return s.migrateCommit(p, r)
	case api.MigrateAbort:
		if m == nil {
			return refuse(api.CodeConflict, "no migration of %s in flight", r.Prefix)
		}
		switch m.Phase {
		case api.MigrationCommitted:
			return refuse(api.CodeConflict, "the migration of %s to %s committed: it can only finish", r.Prefix, m.To)
		case api.MigrationSealing:
			m.Phase = api.MigrationAborting
		}
	case api.MigrateEnd:
		if m != nil && m.Phase == api.MigrationSealing {
			return refuse(api.CodeConflict, "the migration of %s neither committed nor aborted", r.Prefix)
		}
		p.Migration = nil
	default:
		return refuse(api.CodeBadRequest, "unknown migration action %q", r.Action)
	}
	return Result{Prefix: clonePrefix(p)}
}

// migrateBegin records a new migration, or answers its own driver's
// begin again (resumed), or a take-over: the driver of a migration still
// sealing becomes r.Driver, with a new generation. Any other begin while
// a migration is in flight is refused.
func (s *State) migrateBegin(p *api.PrefixInfo, r *api.MigrateRequest, atMS int64) Result {
	if _, ok := s.cells[r.To]; !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.To)
	}
	if r.Driver == "" {
		return refuse(api.CodeBadRequest, "a migration's begin names its driver (a random nonce the driver sends with every step)")
	}
	if m := p.Migration; m != nil {
		switch {
		case m.To != r.To || m.Phase == api.MigrationAborting:
			return refuse(api.CodeConflict, "a migration of %s from %s to %s is in flight (%s): finish it first", r.Prefix, m.From, m.To, m.Phase)
		case m.Phase == api.MigrationCommitted || m.Driver == r.Driver || mutant.On(mutant.MigrationDriver):
			return Result{Prefix: clonePrefix(p)} // resumed; or committed: it only finishes, which anyone may
		case !r.TakeOver:
			return refuse(api.CodeMigrationInProgress, "a migration of %s to %s is being driven by another client since directory index %d: wait for it to finish, or, if it is gone, take it over (lockctl migrate %s --to %s --take-over)", r.Prefix, m.To, m.Gen, r.Prefix, m.To)
		}
		m.Driver, m.Gen = r.Driver, s.index
		return Result{Prefix: clonePrefix(p)}
	}
	if p.Cell == r.To {
		return refuse(api.CodeConflict, "prefix %s is already served by cell %s", r.Prefix, r.To)
	}
	if p.Epoch+1 > api.MaxTokenEpoch {
		return refuse(api.CodeTokenExhausted, "prefix %s is at directory epoch %d, the token limit", r.Prefix, p.Epoch)
	}
	p.Migration = &api.Migration{From: p.Cell, To: r.To, Phase: api.MigrationSealing, BeganAt: s.index, BeganAtMS: max(atMS, 0), Driver: r.Driver, Gen: s.index}
	return Result{Prefix: clonePrefix(p)}
}

// migrateCommit moves the prefix to the new cell, once its driver shows
// that the new cell's copy is the sealed source: the same node count and
// digest as the old cell computed at the seal.
func (s *State) migrateCommit(p *api.PrefixInfo, r *api.MigrateRequest) Result {
	m := p.Migration
	if m == nil {
		return refuse(api.CodeConflict, "no migration of %s in flight", r.Prefix)
	}
	switch m.Phase {
	case api.MigrationCommitted:
		return Result{Prefix: clonePrefix(p)}
	case api.MigrationAborting:
		return refuse(api.CodeConflict, "the migration of %s was aborted", r.Prefix)
	}
	if res, ok := notDriver(m, r); !ok {
		return res
	}
	if m.SealIndex == 0 || m.SealDigest == "" {
		return refuse(api.CodeConflict, "the migration of %s has no recorded seal: run it again (lockctl migrate %s --to %s --take-over)", r.Prefix, r.Prefix, m.To)
	}
	if (r.Nodes != m.SealNodes || r.Digest != m.SealDigest) && !mutant.On(mutant.CopyDigest) {
		return refuse(api.CodeCopyMismatch, "the copy of %s on %s has %d nodes (%s), the sealed source on %s %d (%s): not committed; run the migration again (lockctl migrate %s --to %s --take-over) or abort it (--abort)",
			r.Prefix, m.To, r.Nodes, r.Digest, m.From, m.SealNodes, m.SealDigest, r.Prefix, m.To)
	}
	m.Phase = api.MigrationCommitted
	p.Cell = m.To
	p.Epoch++
	return Result{Prefix: clonePrefix(p)}
}

// notDriver refuses a step of a migration still sealing from any client
// but its driver (one that was taken over stops here).
func notDriver(m *api.Migration, r *api.MigrateRequest) (Result, bool) {
	if m.Driver == r.Driver || mutant.On(mutant.MigrationDriver) {
		return Result{}, true
	}
	return refuse(api.CodeMigrationInProgress, "the migration of %s to %s is driven by another client since directory index %d (taken over): this driver stops", r.Prefix, m.To, m.Gen), false
}
