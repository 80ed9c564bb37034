package sdk

import (
	"context"
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

// MovePrefix moves a prefix to another cell, safely at every step, and
// resumes a migration of the prefix to the same cell that an earlier
// call (or a crashed lockctl) left in flight:
//
//  1. the directory records the migration (begin);
//  2. the old cell seals the prefix: from that entry on it refuses every
//     write and read under it with moved, and its ephemeral nodes are
//     gone (their holders get lock-lost), so no two cells ever grant
//     under the prefix;
//  3. the persistent nodes, frozen by the seal, are copied page by page
//     into the new cell, which keeps them staged (not served);
//  4. the directory commits the move with the prefix's epoch + 1: from
//     here it only goes forward, and every token issued after it compares
//     above every token issued before;
//  5. the new cell's leader serves the staged copy (ensure_prefix) as soon
//     as it reads the directory; the old cell drops its copy, keeping the
//     sealed root that answers moved.
//
// Each step is idempotent; before step 4 AbortMove undoes the move.
func (c *Client) MovePrefix(ctx context.Context, prefix, to string, progress func(MoveProgress)) (MoveResult, error) {
	if progress == nil {
		progress = func(MoveProgress) {}
	}
	start := time.Now()
	res := MoveResult{Prefix: prefix, To: to}
	if err := c.RefreshDirectory(ctx); err != nil {
		return res, err
	}
	dir := c.Directory()
	pi, ok := dir.Prefix(prefix)
	if !ok {
		return res, api.Errorf(api.CodeNotFound, "no prefix %s in the directory", prefix)
	}
	if m := pi.Migration; m != nil && m.Phase == api.MigrationAborting {
		if err := c.finishAbort(ctx, pi); err != nil {
			return res, err
		}
	}
	if pi.Migration == nil || pi.Migration.Phase == api.MigrationSealing {
		var err error
		if pi, err = c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateBegin, To: to}); err != nil {
			return res, err
		}
	}
	m := *pi.Migration
	if m.To != to {
		return res, api.Errorf(api.CodeConflict, "a migration of %s to %s is in flight: finish or abort it first", prefix, m.To)
	}
	res.From = m.From
	progress(MoveProgress{Step: "begun", Detail: fmt.Sprintf("%s → %s at directory index %d", m.From, m.To, m.BeganAt)})
	var sealedAt time.Time
	if m.Phase == api.MigrationSealing {
		seal, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: prefix, Op: api.PrefixSeal, To: to, DirIndex: m.BeganAt})
		if err != nil {
			return res, fmt.Errorf("seal on %s: %w", m.From, err)
		}
		sealedAt = time.Now()
		res.SealIndex = seal.Index
		if _, err := c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateSealed, SealIndex: seal.Index, BeganAt: m.BeganAt}); err != nil {
			return res, err
		}
		progress(MoveProgress{Step: "sealed", Detail: fmt.Sprintf("%s refuses writes under %s from index %d", m.From, prefix, seal.Index)})
		n, err := c.copyPrefix(ctx, prefix, m.From, to, pi.Epoch+1, progress)
		res.Nodes = n
		if err != nil {
			return res, err
		}
		if pi, err = c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateCommit, BeganAt: m.BeganAt}); err != nil {
			return res, err
		}
		progress(MoveProgress{Step: "committed", Nodes: n, Detail: fmt.Sprintf("%s is on %s at epoch %d", prefix, to, pi.Epoch)})
	}
	res.Epoch = pi.Epoch
	// The new cell serves once its leader has read the commit.
	for attempt := 0; ; attempt++ {
		st, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: to, Prefix: prefix, Op: api.PrefixState})
		if err == nil && st.State == api.PrefixServing && st.Epoch >= pi.Epoch {
			break
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		sleepCtx(ctx, min(backoff(attempt), 200*time.Millisecond))
	}
	if !sealedAt.IsZero() {
		res.Refusing = time.Since(sealedAt)
	}
	progress(MoveProgress{Step: "serving", Nodes: res.Nodes, Detail: fmt.Sprintf("%s serves %s", to, prefix)})
	if _, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: m.From, Prefix: prefix, Op: api.PrefixDrop}); err != nil {
		return res, fmt.Errorf("drop the old copy on %s: %w", m.From, err)
	}
	progress(MoveProgress{Step: "dropped", Detail: fmt.Sprintf("%s dropped its copy (it answers moved)", m.From)})
	if _, err := c.migrateStep(ctx, api.MigrateRequest{Prefix: prefix, Action: api.MigrateEnd, BeganAt: m.BeganAt}); err != nil {
		return res, err
	}
	res.Total = time.Since(start)
	progress(MoveProgress{Step: "done", Nodes: res.Nodes})
	return res, nil
}

// copyPrefix copies the sealed prefix's persistent nodes from one cell to
// another, page by page, and returns how many it copied.
func (c *Client) copyPrefix(ctx context.Context, prefix, from, to string, epoch uint64, progress func(MoveProgress)) (int, error) {
	after, n := "", 0
	for page := 0; ; page++ {
		exp, err := c.prefixOp(ctx, api.PrefixOpRequest{Cell: from, Prefix: prefix, Op: api.PrefixExport, After: after, Limit: exportPage})
		if err != nil {
			return n, fmt.Errorf("export from %s: %w", from, err)
		}
		req := api.PrefixOpRequest{Cell: to, Prefix: prefix, Op: api.PrefixStage, Epoch: epoch, First: page == 0, Last: !exp.More, Nodes: exp.Nodes}
		if _, err := c.prefixOp(ctx, req); err != nil {
			return n, fmt.Errorf("stage on %s: %w", to, err)
		}
		n += len(exp.Nodes)
		progress(MoveProgress{Step: "copying", Nodes: n})
		if !exp.More {
			return n, nil
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
