package sdk

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
)

// backupTimeout bounds one backup attempt: exporting a large cell's
// snapshot takes seconds.
const backupTimeout = 5 * time.Minute

// Backup makes the cell's leader export a snapshot of the cell to the
// backup store its lockd was started with (lockd serve --backup-dir), and
// returns where it went, its index and the digest a restore reports. A
// retry after an unknown outcome takes another backup, which is harmless.
func (c *Client) Backup(ctx context.Context, cell string) (api.BackupResponse, error) {
	cs, err := c.cellByName(cell)
	if err != nil {
		return api.BackupResponse{}, err
	}
	var resp api.BackupResponse
	err = c.do(ctx, cs, &call{route: api.RouteAdminBackup, req: api.BackupRequest{Cell: cell}, resp: &resp, retryUnsure: true, timeout: backupTimeout})
	return resp, err
}
