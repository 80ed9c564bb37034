package sdk

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// backupTimeout bounds one backup attempt: exporting a large cell's
// snapshot takes seconds.
const backupTimeout = 5 * time.Minute

// Backup makes the cell's leader export a snapshot of the cell to the
// backup store its lockd was started with (lockd serve --backup-dir), and
// returns where it went, its index and the digest a restore reports. A
// retry after an unknown outcome takes another backup, which is harmless.
func (c *Client) Backup(ctx context.Context, cell string) (api.BackupResponse, error) {
	cs, err := c.cellNamed(ctx, cell)
	if err != nil {
		return api.BackupResponse{}, err
	}
	var resp api.BackupResponse
	err = c.do(ctx, cs, &call{route: api.RouteAdminBackup, req: api.BackupRequest{Cell: cell}, resp: &resp, retryUnsure: true, timeout: backupTimeout})
	return resp, err
}

// directoryCall commits one directory command through the directory
// group's replicas (any of them: a follower forwards it to the leader).
// Every directory command is safe to resend: a second copy changes
// nothing, or is refused (a cell created twice answers conflict).
func (c *Client) directoryCall(ctx context.Context, route string, req any) (directoryResult, error) {
	var resp directoryResult
	d := c.dir.Load()
	cs := d.directory
	if cs == nil || cs.pick() == "" {
		cs = c.seeds
	}
	err := c.do(ctx, cs, &call{route: route, req: req, resp: &resp, anyReplica: true, retryUnsure: true})
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		_ = c.RefreshDirectory(rctx) // the change is in the directory now: route by it
		cancel()
	}
	return resp, err
}

// directoryResult is a directory command's reply.
type directoryResult struct {
	Index  uint64          `json:"index"`
	Cell   *api.CellInfo   `json:"cell,omitempty"`
	Prefix *api.PrefixInfo `json:"prefix,omitempty"`
}

// CreateCell creates a cell: its replicas are placed by the directory
// (spread over zones, least loaded lockds first, never two on one lockd)
// or on exactly req.On. The lockds start their replicas within a second.
func (c *Client) CreateCell(ctx context.Context, req api.CreateCellRequest) (api.CellInfo, error) {
	r, err := c.directoryCall(ctx, api.RouteAdminCellCreate, req)
	if err != nil {
		return api.CellInfo{}, err
	}
	return *r.Cell, nil
}

// RestoreCell plans the rebuild of a cell from its backup at
// req.BackupIndex on new replicas (on req.On, or placed), raising its
// prefixes' epochs, and returns the plan lockd restore imports by on each
// of those lockds. Planning again supersedes an earlier plan.
func (c *Client) RestoreCell(ctx context.Context, req api.RestoreCellRequest) (api.RestorePlan, error) {
	if _, err := c.directoryCall(ctx, api.RouteAdminRestore, req); err != nil {
		return api.RestorePlan{}, err
	}
	view, err := directory.New(c.Directory())
	if err != nil {
		return api.RestorePlan{}, api.Errorf(api.CodeInternal, "%v", err)
	}
	return view.RestorePlan(req.Cell)
}

// AssignPrefix gives an unassigned top-level prefix to a cell, at epoch 1.
// A prefix already served moves with MovePrefix instead.
func (c *Client) AssignPrefix(ctx context.Context, prefix, cell string) (api.PrefixInfo, error) {
	r, err := c.directoryCall(ctx, api.RouteAdminPrefixAssign, api.AssignPrefixRequest{Prefix: prefix, Cell: cell})
	if err != nil {
		return api.PrefixInfo{}, err
	}
	return *r.Prefix, nil
}

// migrateStep commits one step of a migration in the directory.
func (c *Client) migrateStep(ctx context.Context, req api.MigrateRequest) (api.PrefixInfo, error) {
	r, err := c.directoryCall(ctx, api.RouteAdminMigrate, req)
	if err != nil {
		return api.PrefixInfo{}, err
	}
	return *r.Prefix, nil
}

// prefixOp runs one migration step on a cell's leader.
func (c *Client) prefixOp(ctx context.Context, req api.PrefixOpRequest) (api.PrefixOpResponse, error) {
	cs, err := c.cellNamed(ctx, req.Cell)
	if err != nil {
		return api.PrefixOpResponse{}, err
	}
	var resp api.PrefixOpResponse
	err = c.do(ctx, cs, &call{route: api.RouteAdminPrefixOp, req: req, resp: &resp, retryUnsure: true, timeout: time.Minute})
	return resp, err
}

// ChangeMember makes one membership change of a cell on its leader: add a
// replica on a lockd (a learner, catching up without a vote, when
// req.Learner), promote a learner, or remove a replica. One change at a
// time; a change that would leave fewer than three voters, put two
// replicas of the cell on one lockd, or that the cell cannot commit is
// refused and changes nothing. Running it again resumes one a crash left
// pending.
func (c *Client) ChangeMember(ctx context.Context, req api.MemberRequest) (api.CellInfo, error) {
	cs, err := c.cellNamed(ctx, req.Cell)
	if err != nil {
		return api.CellInfo{}, err
	}
	var resp api.CellInfo
	err = c.do(ctx, cs, &call{route: api.RouteAdminMember, req: req, resp: &resp, retryUnsure: true, timeout: time.Minute})
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		_ = c.RefreshDirectory(rctx)
		cancel()
	}
	return resp, err
}

// RegisterProxy records a lockproxy in the directory (by name; a new
// address replaces the old). Clients read the proxies from the directory
// and send through them by default (Config.Direct).
func (c *Client) RegisterProxy(ctx context.Context, p api.ProxyInfo) error {
	_, err := c.directoryCall(ctx, api.RouteAdminProxyRegister, p)
	return err
}
