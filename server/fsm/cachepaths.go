package fsm

// The committed record of which nodes each session may hold in its
// client cache: the ground a new leader's cache fence stands on. A
// session's record is the paths the leaders of one epoch granted it
// (cache_session with a path, proposed before the grant is answered); the
// first grant under a later epoch starts it afresh (the client flushed
// its whole cache when it learned of that leader, before it could be
// granted anything). A change of a node drops it from every record: the
// leader invalidated its cachers before it proposed the change. So a new
// leader changing a node waits only for the sessions whose record holds
// it and that have not yet seen the new leader, not for every caching
// session of the cell.

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// cacheSession marks a live session as caching reads and, with a path,
// records that the leader of epoch c.Epoch grants it that node. A grant
// from an older epoch is refused (not_leader); a record at
// api.MaxCachedPathsPerSession refuses more (limit_exceeded): the leader
// serves that read uncached.
func (s *State) cacheSession(c *Command) Result {
	sess, err := s.liveSession(c.Target)
	if err != nil {
		return Result{Err: err}
	}
	if c.Path == "" {
		sess.caches = true
		return Result{Session: sess.id}
	}
	if c.Epoch != s.epoch {
		return Result{Err: api.Errorf(api.CodeNotLeader, "cache grant from leader epoch %d, now %d", c.Epoch, s.epoch)}
	}
	if err := api.ValidatePath(c.Path); err != nil {
		return Result{Err: api.Errorf(api.CodeBadRequest, "cache grant: %v", err)}
	}
	if sess.cachedEpoch != c.Epoch {
		s.forgetCached(sess)
		sess.cachedEpoch = c.Epoch
	}
	if _, ok := sess.cached[c.Path]; !ok && len(sess.cached) >= api.MaxCachedPathsPerSession {
		return Result{Err: api.Errorf(api.CodeLimitExceeded, "session %d is recorded caching %d nodes (MaxCachedPathsPerSession)", sess.id, len(sess.cached))}
	}
	sess.caches = true
	s.addCached(sess, c.Path)
	return Result{Session: sess.id}
}

func (s *State) addCached(sess *session, path string) {
	if sess.cached == nil {
		sess.cached = map[string]struct{}{}
	}
	sess.cached[path] = struct{}{}
	if s.cachedBy == nil {
		s.cachedBy = map[string]map[uint64]struct{}{}
	}
	if s.cachedBy[path] == nil {
		s.cachedBy[path] = map[uint64]struct{}{}
	}
	s.cachedBy[path][sess.id] = struct{}{}
}

// forgetCached empties a session's record (a later epoch's first grant,
// or the session ended).
func (s *State) forgetCached(sess *session) {
	for p := range sess.cached {
		s.dropCacher(p, sess.id)
	}
	sess.cached = nil
}

func (s *State) dropCacher(path string, id uint64) {
	if m := s.cachedBy[path]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(s.cachedBy, path)
		}
	}
}

// uncache drops the changed nodes from every record. Only a change the
// leader fences does (its cachers were invalidated before it was
// proposed); a lock-delay's start or end leaves the record as it is.
func (s *State) uncache(changes []Change) {
	if len(s.cachedBy) == 0 {
		return
	}
	for _, ch := range changes {
		switch ch.Type {
		case ChangeData, ChangeDeleted, ChangeCreated, ChangeChildren, ChangeMoved:
			for id := range s.cachedBy[ch.Path] {
				if sess := s.sessions[id]; sess != nil {
					delete(sess.cached, ch.Path)
				}
			}
			delete(s.cachedBy, ch.Path)
		}
	}
}

// cachedList is a session's record in path order (snapshots, SessionInfo).
func cachedList(sess *session) []string {
	if len(sess.cached) == 0 {
		return nil
	}
	out := make([]string, 0, len(sess.cached))
	for p := range sess.cached {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// checkCached checks the records against their index and their bounds.
func (s *State) checkCached() error {
	n := 0
	for id, sess := range s.sessions {
		if len(sess.cached) > api.MaxCachedPathsPerSession || (len(sess.cached) > 0 && !sess.caches) {
			return fmt.Errorf("session %d records %d cached nodes (caches %v)", id, len(sess.cached), sess.caches)
		}
		for p := range sess.cached {
			if _, ok := s.cachedBy[p][id]; !ok {
				return fmt.Errorf("session %d's cached %s is missing from the index", id, p)
			}
		}
		n += len(sess.cached)
	}
	for p, m := range s.cachedBy {
		if len(m) == 0 {
			return fmt.Errorf("empty cache index entry %s", p)
		}
		for id := range m {
			sess := s.sessions[id]
			if sess == nil {
				return fmt.Errorf("cache index %s names dead session %d", p, id)
			}
			if _, ok := sess.cached[p]; !ok {
				return fmt.Errorf("cache index %s names session %d, whose record lacks it", p, id)
			}
			n--
		}
	}
	if n != 0 {
		return fmt.Errorf("cache records and index disagree by %d", n)
	}
	return nil
}

// readCached restores a session's record from its snapshot image.
func (s *State) readCached(sess *session, ss snapSession) error {
	if len(ss.Cached) > api.MaxCachedPathsPerSession {
		return fmt.Errorf("snapshot session %d records %d cached nodes", ss.ID, len(ss.Cached))
	}
	sess.cachedEpoch = ss.CachedAt
	for _, p := range ss.Cached {
		if err := api.ValidatePath(p); err != nil {
			return fmt.Errorf("snapshot session %d: cached %w", ss.ID, err)
		}
		s.addCached(sess, p)
	}
	return nil
}

// CacheRecorded reports whether session id's record holds path granted
// under epoch: a leader of epoch need not commit that grant again.
func (s *State) CacheRecorded(id uint64, path string, epoch uint64) bool {
	sess := s.sessions[id]
	if sess == nil || sess.cachedEpoch != epoch {
		return false
	}
	_, ok := sess.cached[path]
	return ok
}
