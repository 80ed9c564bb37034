package sdk

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
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
		cs, err := c.cellForPathFresh(ctx, path)
		if err != nil {
			return err
		}
		err = op(cs)
		if attempt >= maxReroutes || !c.rerouted(ctx, path, cs, err) {
			return err
		}
	}
}

// cellForPathFresh is cellForPath, after one more directory read (shared,
// as for an unknown cell: dirrefresh.go) if the client's view has no cell
// for the path's prefix: one assigned since the client last read it. A
// prefix no map named is refused at once while the map is the same and
// for api.UnknownCellWait (a caller retrying a mistyped prefix costs no
// directory reads).
func (c *Client) cellForPathFresh(ctx context.Context, path string) (*cellState, error) {
	cs, err := c.cellForPath(path)
	var ae *api.Error
	if err == nil || !errors.As(err, &ae) || ae.Code != api.CodeWrongCell || mutant.On(mutant.NoCellRefresh) {
		return cs, err
	}
	prefix := api.Prefix(path)
	if c.unmapped.recent(prefix, c.dir.Load().raw.Index) {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, api.UnknownCellWait)
	defer cancel()
	c.refreshForUnknown(rctx)
	cs, err = c.cellForPath(path)
	if err != nil {
		c.unmapped.note(prefix, c.dir.Load().raw.Index)
	}
	return cs, err
}

// unmappedPrefix is the last prefix no directory map named, the map's
// index, and when.
type unmappedPrefix struct {
	mu     sync.Mutex
	prefix string
	index  uint64
	at     time.Time
}

func (u *unmappedPrefix) note(prefix string, index uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.prefix, u.index, u.at = prefix, index, time.Now()
}

// recent reports whether prefix was found unmapped in the map at index,
// within api.UnknownCellWait.
func (u *unmappedPrefix) recent(prefix string, index uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.prefix == prefix && u.index == index && time.Since(u.at) < api.UnknownCellWait
}
