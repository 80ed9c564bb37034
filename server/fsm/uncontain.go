package fsm

// A put's container vocabulary (log codec V3): a put with MakeParents and
// Container makes its missing directories containers, as a lock recipe's
// create does (container.go); a put with Uncontain of a container makes
// it a plain node. The etcd gateway writes both: a key's parents are
// containers (not keys, deleted with their last child), and a client's
// put of a key that exists only as a parent makes it a key, which the
// cell must then not delete with its last child.

// putCreate is the create a put of a missing node makes: its value and
// parents (containers if the put asks it), the entry's tenant and quota.
func putCreate(c *Command) Command {
	return Command{
		Op: OpCreate, Path: c.Path, Value: c.Value, MakeParents: c.MakeParents, ParentsFrom: c.ParentsFrom,
		Container: c.Container, Tenant: c.Tenant, Quota: c.Quota,
	}
}

// uncontain makes n, just written by the put c at index, a plain node if
// it is a container and c asks it: as if the put created it (version 1,
// create index the put's), since a container was no key. Its sequence
// counter is folded into the cell's containerSeq first, as removing a
// container does, so that a container made again at its path after it
// is deleted never hands out a number it did. The caller touched n.
func (s *State) uncontain(index uint64, c *Command, n *node) {
	if !c.Uncontain || !n.container {
		return
	}
	s.foldContainerSeq(n)
	n.container = false
	n.version = 1
	n.createIndex = index
}
