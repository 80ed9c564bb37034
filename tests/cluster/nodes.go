package cluster

// Running reports whether replica id's process runs (paused counts).
func (c *Cluster) Running(id int) bool {
	p, err := c.proc(id)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Paused reports whether replica id is paused.
func (c *Cluster) Paused(id int) bool {
	p, err := c.proc(id)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked() && p.paused
}

// PID is the process id of replica id, 0 if it is not running.
func (c *Cluster) PID(id int) int {
	p, err := c.proc(id)
	if err != nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// IDs are the replica ids, 1..N.
func (c *Cluster) IDs() []int {
	ids := make([]int, len(c.procs))
	for i := range ids {
		ids[i] = i + 1
	}
	return ids
}

// Node describes replica id.
func (c *Cluster) Node(id int) Node {
	p, err := c.proc(id)
	if err != nil {
		return Node{}
	}
	return p.node
}

// APIAddr is the API address (host:port) of replica id.
func (c *Cluster) APIAddr(id int) string { return c.Node(id).APIAddr }

// IDOf returns the replica id serving API address addr, 0 if none.
func (c *Cluster) IDOf(addr string) int {
	for _, p := range c.procs {
		if p.node.APIAddr == addr {
			return p.node.ID
		}
	}
	return 0
}

// Endpoints are the API addresses of every replica, in id order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.node.APIAddr
	}
	return out
}

// Cells are the cluster's cells.
func (c *Cluster) Cells() []CellSpec { return append([]CellSpec(nil), c.opts.Cells...) }

// Options are the options the cluster runs with, defaults filled in.
func (c *Cluster) Options() Options { return c.opts }

// Dir is the cluster's data and log directory.
func (c *Cluster) Dir() string { return c.dir }
