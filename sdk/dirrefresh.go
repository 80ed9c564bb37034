package sdk

// Reading the directory again for a cell the client's view does not name
// (one created a moment ago: issue 23, finding 2). A call naming a cell
// waits for a directory read that began after it asked, bounded by
// api.UnknownCellWait, before it is refused wrong_cell. However many such
// calls come (a lockproxy forwards the cell names its clients send), at
// most one read runs at a time and reads start at least
// api.DirectoryRefreshGap apart.

import (
	"context"
	"sync"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// dirRefresher shares directory reads among the callers waiting for one.
type dirRefresher struct {
	mu      sync.Mutex
	next    chan struct{} // closed when the read collecting callers now ends
	running bool
	last    time.Time // when the last read started
}

// cellNamed is the cell named name, after one more directory read if the
// client's view does not name it.
func (c *Client) cellNamed(ctx context.Context, name string) (*cellState, error) {
	if cs := c.dir.Load().cells[name]; cs != nil || mutant.On(mutant.NoCellRefresh) {
		return c.cellByName(name)
	}
	rctx, cancel := context.WithTimeout(ctx, api.UnknownCellWait)
	defer cancel()
	c.refreshForUnknown(rctx)
	return c.cellByName(name)
}

// routedBy is the directory index a cell call says it was routed by
// (api.HeaderDirectoryIndex): the client's view's, or the floor the call
// carries (a proxy's client's), the later.
func (c *Client) routedBy(cl *call) uint64 {
	if cl.cell == "" {
		return 0
	}
	return max(c.dir.Load().raw.Index, cl.dirIndex)
}

// KnowsCell reports whether the directory names cell, reading it again
// (as cellNamed) if the client's view does not.
func (c *Client) KnowsCell(ctx context.Context, cell string) bool {
	_, err := c.cellNamed(ctx, cell)
	return err == nil
}

// refreshForUnknown waits, up to ctx, for a directory read that starts
// after now.
func (c *Client) refreshForUnknown(ctx context.Context) {
	r := &c.unknownCells
	r.mu.Lock()
	if r.next == nil {
		r.next = make(chan struct{})
	}
	done := r.next
	if !r.running {
		r.running = true
		go c.refreshLoop()
	}
	r.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// refreshLoop reads the directory while callers wait for a read, then
// ends.
func (c *Client) refreshLoop() {
	r := &c.unknownCells
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.next != nil {
		if wait := api.DirectoryRefreshGap - time.Since(r.last); wait > 0 {
			r.mu.Unlock()
			sleepCtx(c.ctx, wait)
			r.mu.Lock()
		}
		done := r.next // everyone who asked by now is served by this read
		r.next, r.last = nil, time.Now()
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, api.UnknownCellWait)
		_ = c.RefreshDirectory(ctx)
		cancel()
		close(done)
		r.mu.Lock()
	}
	r.running = false
}
