package sdk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// exportPage is how many nodes a migration copies per request.
const exportPage = 500

// MoveProgress reports a prefix migration's progress.
type MoveProgress struct {
	Step   string // begun, sealed, copying, committed, serving, dropped, done
	Nodes  int    // nodes copied so far
	Detail string
}

// MoveResult describes a finished migration.
type MoveResult struct {
	Prefix    string
	From, To  string
	Epoch     uint64 // the prefix's directory epoch on the new cell
	Nodes     int    // persistent nodes moved
	SealIndex uint64 // the old cell's index of the seal
	// Refusing is how long the prefix refused writes: from the seal to
	// the new cell serving.
	Refusing time.Duration
	Total    time.Duration
}

// MoveOption changes how MovePrefix drives a migration.
type MoveOption func(*moveOptions)

type moveOptions struct{ takeOver bool }

// TakeOver makes MovePrefix take over a migration of the prefix to the
// same cell that another client drives (one that died, or that then
// stops at its next step, refused with migration_in_progress). Without
// it such a migration is refused with migration_in_progress.
func TakeOver() MoveOption { return func(o *moveOptions) { o.takeOver = true } }

// MovePrefix moves a prefix to another cell, safely at every step, and
// finishes a committed migration of the prefix that an earlier call (or
// a crashed lockctl) left in flight:
//
//  1. the directory records the migration (begin) and this call as its
//     one driver (a random name): while it drives, another client's
//     begin is refused (migration_in_progress) unless it takes over
//     (TakeOver), after which this one's steps are refused and it stops;
//  2. the old cell seals the prefix: from that entry on it refuses every
//     write and read under it with moved, and its ephemeral nodes are
//     gone (their holders get lock-lost; on the new cell nobody gets
//     their locks before their lease and lock-delay may have run), so no
//     two cells ever grant under the prefix; the seal counts and digests
//     the prefix's nodes, and the directory records both;
//  3. the persistent nodes, frozen by the seal, are copied page by page
//     into the new cell under this driver's generation (a page of a
//     driver taken over is refused there), which keeps them staged (not
//     served) and counts and digests the complete copy;
//  4. the directory commits the move with the prefix's epoch + 1, only if
//     the copy's count and digest are the seal's (else copy_mismatch and
//     nothing changes): from here it only goes forward, and every token
//     issued after it compares above every token issued before;
//  5. the new cell's leader serves the staged copy (ensure_prefix) as soon
//     as it reads the directory; the old cell drops its copy, keeping the
//     sealed root that answers moved.
//
// Each step is idempotent; before step 4 AbortMove undoes the move.
func (c *Client) MovePrefix(ctx context.Context, prefix, to string, progress func(MoveProgress), opts ...MoveOption) (MoveResult, error) {
	if progress == nil {
		progress = func(MoveProgress) {}
	}
	var o moveOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	res := MoveResult{Prefix: prefix, To: to}
	pi, err := c.beginMove(ctx, prefix, to, o.takeOver)
	if err != nil {
		return res, err
	}
	m := *pi.Migration
	res.From = m.From
	progress(MoveProgress{Step: "begun", Detail: fmt.Sprintf("%s → %s at directory index %d (driver generation %d)", m.From, m.To, m.BeganAt, m.Gen)})
	var sealedAt time.Time
	if m.Phase == api.MigrationSealing {
		if pi, sealedAt, err = c.sealCopyCommit(ctx, pi, &res, progress); err != nil {
			return res, moveFailed(err, prefix, to, false)
		}
	}
	res.Epoch = pi.Epoch
	if err := c.finishMove(ctx, prefix, m, pi.Epoch, progress); err != nil {
		return res, moveFailed(err, prefix, to, true)
	}
	if !sealedAt.IsZero() {
		res.Refusing = time.Since(sealedAt)
	}
	res.Total = time.Since(start)
	progress(MoveProgress{Step: "done", Nodes: res.Nodes})
	return res, nil
}

// beginMove finishes an aborted migration of prefix left in flight, and
// begins (or takes over, or finds committed) the migration to to, with a
// new random driver name.
func (c *Client) beginMove(ctx context.Context, prefix, to string, takeOver bool) (api.PrefixInfo, error) {
	if err := c.RefreshDirectory(ctx); err != nil {
		return api.PrefixInfo{}, err
	}
	pi, ok := c.Directory().Prefix(prefix)
	if !ok {
		return pi, api.Errorf(api.CodeNotFound, "no prefix %s in the directory", prefix)
	}
	if m := pi.Migration; m != nil && m.Phase == api.MigrationAborting {
		if err := c.finishAbort(ctx, pi); err != nil {
			return pi, err
		}
	}
	if pi.Migration == nil || pi.Migration.Phase != api.MigrationCommitted {
		var nonce [16]byte
		if _, err := rand.Read(nonce[:]); err != nil {
			return pi, fmt.Errorf("a driver name for the migration: %w", err)
		}
		var err error
		req := api.MigrateRequest{Prefix: prefix, Action: api.MigrateBegin, To: to, Driver: hex.EncodeToString(nonce[:]), TakeOver: takeOver}
		if pi, err = c.migrateStep(ctx, req); err != nil {
			return pi, err
		}
	}
	if m := pi.Migration; m == nil || m.To != to {
		return pi, api.Errorf(api.CodeConflict, "the directory shows no migration of %s to %s in flight (%+v): finish or abort the one there first", prefix, to, m)
	}
	return pi, nil
}

// sealCopyCommit seals the prefix on the old cell, records the seal,
// copies the prefix to the new cell and commits the move.
func (c *Client) sealCopyCommit(ctx context.Context, pi api.PrefixInfo, res *MoveResult, progress func(MoveProgress)) (api.PrefixInfo, time.Time, error) {
	m, prefix := *pi.Migration, pi.Prefix
	// The new cell answers first (a linearizable read on its leader): one
	// created a moment ago may still be starting its replicas and electing,
	// and the prefix refuses writes from the seal until the copy is served.
	if _, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.To, Prefix: prefix, Op: api.PrefixState}); err != nil {
		return pi, time.Time{}, fmt.Errorf("the new cell %s before the seal: %w", m.To, err)
	}
	seal, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: prefix, Op: api.PrefixSeal, To: m.To, DirIndex: m.BeganAt})
	if err != nil {
		return pi, time.Time{}, fmt.Errorf("seal on %s: %w", m.From, err)
	}
	sealedAt := time.Now()
	res.SealIndex = seal.Index
	rec := api.MigrateRequest{Prefix: prefix, Action: api.MigrateSealed, SealIndex: seal.Index, BeganAt: m.BeganAt, Driver: m.Driver, Nodes: seal.Count, Digest: seal.Digest}
	if _, err := c.migrateStep(ctx, rec); err != nil {
		return pi, sealedAt, err
	}
	progress(MoveProgress{Step: "sealed", Detail: fmt.Sprintf("%s refuses writes under %s from index %d (%d nodes)", m.From, prefix, seal.Index, seal.Count)})
	last, n, err := c.copyPrefix(ctx, prefix, m, pi.Epoch+1, progress)
	res.Nodes = n
	if err != nil {
		return pi, sealedAt, err
	}
	commit := api.MigrateRequest{Prefix: prefix, Action: api.MigrateCommit, BeganAt: m.BeganAt, Driver: m.Driver, Nodes: last.Count, Digest: last.Digest}
	if pi, err = c.migrateStep(ctx, commit); err != nil {
		return pi, sealedAt, err
	}
	progress(MoveProgress{Step: "committed", Nodes: n, Detail: fmt.Sprintf("%s is on %s at epoch %d", prefix, m.To, pi.Epoch)})
	return pi, sealedAt, nil
}

// finishMove waits for the new cell to serve the prefix at epoch, then
// drops the old cell's copy and ends the migration in the directory.
func (c *Client) finishMove(ctx context.Context, prefix string, m api.Migration, epoch uint64, progress func(MoveProgress)) error {
	for attempt := 0; ; attempt++ {
		st, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.To, Prefix: prefix, Op: api.PrefixState})
		if err == nil && st.State == api.PrefixServing && st.Epoch >= epoch {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleepCtx(ctx, min(backoff(attempt), 200*time.Millisecond))
	}
	progress(MoveProgress{Step: "serving", Detail: fmt.Sprintf("%s serves %s", m.To, prefix)})
	if _, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: prefix, Op: api.PrefixDrop}); err != nil {
		return fmt.Errorf("drop the old copy on %s: %w", m.From, err)
	}
	progress(MoveProgress{Step: "dropped", Detail: fmt.Sprintf("%s dropped its copy (it answers moved)", m.From)})
	_, err := c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateEnd, BeganAt: m.BeganAt, Driver: m.Driver})
	return err
}

// copyPrefix copies the sealed prefix's persistent nodes from the old
// cell to the new, page by page under the driver's generation, and
// returns the last page's result (the copy's count and digest) and how
// many nodes it copied.
func (c *Client) copyPrefix(ctx context.Context, prefix string, m api.Migration, epoch uint64, progress func(MoveProgress)) (api.PrefixOpResponse, int, error) {
	after, n := "", 0
	for page := uint64(0); ; page++ {
		exp, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: prefix, Op: api.PrefixExport, After: after, Limit: exportPage})
		if err != nil {
			return api.PrefixOpResponse{}, n, fmt.Errorf("export from %s: %w", m.From, err)
		}
		req := api.PrefixOpRequest{Cell: m.To, Prefix: prefix, Op: api.PrefixStage, Epoch: epoch, First: page == 0, Last: !exp.More, Nodes: exp.Nodes, Gen: m.Gen, Page: page}
		st, err := c.prefixOp(ctx, req)
		if err != nil {
			return st, n, fmt.Errorf("stage on %s: %w", m.To, err)
		}
		n += len(exp.Nodes)
		progress(MoveProgress{Step: "copying", Nodes: n})
		if !exp.More {
			return st, n, nil
		}
		after = exp.Nodes[len(exp.Nodes)-1].Path
	}
}

// AbortMove abandons a migration of prefix that has not committed: the
// directory records the abort (after which the move can never commit),
// the old cell serves the prefix again and the new cell drops its copy.
// A committed migration is refused: finish it with MovePrefix.
func (c *Client) AbortMove(ctx context.Context, prefix string) error {
	if err := c.RefreshDirectory(ctx); err != nil {
		return err
	}
	pi, ok := c.Directory().Prefix(prefix)
	if !ok {
		return api.Errorf(api.CodeNotFound, "no prefix %s in the directory", prefix)
	}
	if pi.Migration == nil {
		return api.Errorf(api.CodeConflict, "no migration of %s in flight", prefix)
	}
	pi, err := c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateAbort, BeganAt: pi.Migration.BeganAt})
	if err != nil {
		return err
	}
	return c.finishAbort(ctx, pi)
}

func (c *Client) finishAbort(ctx context.Context, pi api.PrefixInfo) error {
	m := pi.Migration
	if _, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: pi.Prefix, Op: api.PrefixUnseal, DirIndex: c.Directory().Index}); err != nil {
		return fmt.Errorf("unseal on %s: %w", m.From, err)
	}
	if _, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.To, Prefix: pi.Prefix, Op: api.PrefixDrop}); err != nil {
		return fmt.Errorf("drop the staged copy on %s: %w", m.To, err)
	}
	_, err := c.migrateStep(ctx, api.MigrateRequest{Prefix: pi.Prefix, Action: api.MigrateEnd, BeganAt: m.BeganAt})
	return err
}
