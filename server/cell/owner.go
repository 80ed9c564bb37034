package cell

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// EphemeralOwner is the session owning the ephemeral node at path in this
// replica's state (a local read, for the audit log: not linearizable); ok
// is false if there is no such node.
func (c *Cell) EphemeralOwner(path string) (owner uint64, ok bool) {
	q := getQuery{path: path}
	r, err := readLocal(c, func(s *fsm.State) (api.GetResponse, error) { return c.lookupGet(s, q) })
	if err != nil || !r.Exists || !r.Node.Ephemeral {
		return 0, false
	}
	return r.Node.Owner, true
}
