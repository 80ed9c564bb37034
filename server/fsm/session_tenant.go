package fsm

// SessionTenant is the tenant that opened a live session ("" for none,
// auth off); false if the session is not live. The leader's cacher table
// counts a tenant's entries by it.
func (s *State) SessionTenant(id uint64) (string, bool) {
	sess, ok := s.sessions[id]
	if !ok {
		return "", false
	}
	return sess.tenant, true
}
