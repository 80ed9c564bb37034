package cluster

// replicaArgs are lockd id's own extra arguments: SetReplicaArgs's, else
// Options.ReplicaArgs's.
func (c *Cluster) replicaArgs(id int) []string {
	if extra := c.procs[id-1].extra; extra != nil {
		return extra
	}
	return c.opts.ReplicaArgs[id]
}

// SetReplicaArgs replaces lockd id's own extra arguments (none: an empty
// list) from its next start on (Restart): say, a lockd restarted as
// another build would be.
func (c *Cluster) SetReplicaArgs(id int, args ...string) error {
	p, err := c.proc(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.extra = append([]string{}, args...)
	return nil
}
