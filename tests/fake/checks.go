package fake

// What a lockd refuses before it finds the cell a request is for, on the
// request alone (server/httpapi: sessions.go, nodes.go, locks.go, and
// cells.go's readyCell for the cell a request names), with the same codes
// and messages. They run before the leader check (serve.go onLeader), as
// a lockd's do. The pure checks are api's, shared with the server; the
// rest need the cell's name and prefixes (a lockd's directory view), so
// they are written here as server/httpapi writes them.

import (
	"slices"

	"github.com/lockservice/lockd/api"
)

// checkCell is readyCell's answer for the cell a request names: none is
// bad_request; a name other than the fake's is wrong_cell, as a lockd
// answers for a cell its directory does not know (the fake's lists only
// itself).
func (c *Cell) checkCell(name string) error {
	switch {
	case name == "":
		return api.Errorf(api.CodeBadRequest, "no cell named")
	case name != c.name:
		return api.Errorf(api.CodeWrongCell, "no cell %s", name)
	}
	return nil
}

// needSession refuses a request of the route what that names no session.
func needSession(id uint64, what string) error {
	if id == 0 {
		return api.Errorf(api.CodeNoSession, "%s names no session", what)
	}
	return nil
}

func (c *Cell) checkOpen(req api.OpenSessionRequest) error {
	return firstErr(api.CheckNonce(req.Nonce), c.checkCell(req.Cell))
}

func (c *Cell) checkKeepAlive(req api.KeepAliveRequest) error {
	return firstErr(needSession(req.Session, "keepalive"), c.checkCell(req.Cell))
}

func (c *Cell) checkClose(req api.CloseSessionRequest) error {
	return firstErr(needSession(req.Session, "close"), c.checkCell(req.Cell))
}

// checkGet: a get may arm a data or a children watch, and declares no
// negative cache window.
func checkGet(req api.ReadRequest) error {
	return firstErr(api.CheckWatchKind(req.Watch, api.WatchData, api.WatchChildren), api.CheckCacheWindow(req.CacheWindowMS))
}

// checkChildren: a children read arms a children watch only.
func checkChildren(req api.ReadRequest) error {
	return api.CheckWatchKind(req.Watch, api.WatchChildren)
}

// checkWatch is server/httpapi's checkWatches, then the cell the request
// names: at most MaxWatchesPerCall watches, each on a valid path, of a
// known kind, and on a prefix the named cell serves.
func (c *Cell) checkWatch(req api.WatchRequest) error {
	if err := api.CheckWatchesPerCall(len(req.Watches)); err != nil {
		return err
	}
	for _, w := range req.Watches {
		if err := api.ValidatePath(w.Path); err != nil {
			return err
		}
		if w.Kind != api.WatchData && w.Kind != api.WatchChildren {
			return api.Errorf(api.CodeBadRequest, "unknown watch kind %q", w.Kind)
		}
		if !slices.Contains(c.prefixes, api.Prefix(w.Path)) || req.Cell != c.name {
			return api.Errorf(api.CodeWrongCell, "%s is not served by cell %s", w.Path, req.Cell)
		}
	}
	return c.checkCell(req.Cell)
}

// checkLockCheck: a lock check names the token it checks.
func checkLockCheck(req api.LockCheckRequest) error {
	if req.Token == 0 {
		return api.Errorf(api.CodeBadRequest, "lock check needs the token to check (a grant's fencing token, never 0)")
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
