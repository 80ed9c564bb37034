package sdk

import (
	"context"
	"errors"

	"github.com/lockservice/lockd/api"
)

// maxReroutes bounds how often one call follows a prefix to another cell.
const maxReroutes = 8

// movedTo is a moved refusal: the prefix left cell from for cell to.
type movedTo struct{ from, to string }

// rerouted reports whether err refused a call because the path's prefix
// is not (or no longer) served by the cell it went to: nothing was
// applied, and the call may be made again on the right cell. It records a
// refusal naming the new cell (moved), so that the next call goes there
// even while the directory still names the old one.
func (c *Client) rerouted(ctx context.Context, path string, from *cellState, err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) || (ae.Code != api.CodeMoved && ae.Code != api.CodeWrongCell) || ctx.Err() != nil {
		return false
	}
	if ae.Code == api.CodeMoved && ae.Cell != "" && from != nil {
		c.moves.Store(api.Prefix(path), movedTo{from: from.name, to: ae.Cell})
	}
	// The retry loop reloaded the directory already: follow it if it
	// names another cell now.
	next, nerr := c.cellForPath(path)
	return nerr == nil && next != from
}

// routed runs op on the cell serving path, and again on the cell the
// prefix moved to when the first refuses it (see rerouted).
func (c *Client) routed(ctx context.Context, path string, op func(cs *cellState) error) error {
	for attempt := 0; ; attempt++ {
		cs, err := c.cellForPath(path)
		if err != nil {
			return err
		}
		err = op(cs)
		if attempt >= maxReroutes || !c.rerouted(ctx, path, cs, err) {
			return err
		}
	}
}
