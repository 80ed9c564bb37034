package cell

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// permitGate refuses a semaphore permit's create (api.LockPermit, or a
// Permits field) on a cell whose log codec predates semaphores: a replica
// of an older build could not apply it (codec_too_old). nil: propose it.
func (c *Cell) permitGate(req *api.CreateRequest) error {
	if req.Lock != api.LockPermit && req.Permits == 0 {
		return nil
	}
	if err := fsm.NeedCodec(c.LogCodec(), fsm.LogCodecV2, "a semaphore"); err != nil {
		return err
	}
	return nil
}

// semaphoreInfo fills a lock queue's semaphore fields: N and the permits
// in use, if the lock at resp.Path is a semaphore.
func semaphoreInfo(s *fsm.State, resp *api.LockQueueResponse) {
	if n, inUse, ok := s.SemaphoreOf(resp.Path); ok {
		resp.Permits, resp.InUse = n, inUse
	}
}
