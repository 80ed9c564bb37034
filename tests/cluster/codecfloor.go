package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// codecFloorPoll is how often waitCodecFloor asks the lockds.
const codecFloorPoll = 50 * time.Millisecond

// waitCodecFloor waits, until ctx's deadline, for the directory's log
// codec floor to reach what every lockd advertises (the directory raises
// it once all have registered): the directory then stays as the test
// finds it, rather than changing under a test that compares two reads.
func (c *Cluster) waitCodecFloor(ctx context.Context) error {
	for ctx.Err() == nil {
		if floorReached(c.Statuses(ctx), len(c.procs)) {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(codecFloorPoll):
		}
	}
	return fmt.Errorf("testcluster: the log codec floor never reached what every lockd advertises: %w", ctx.Err())
}

// floorReached reports whether all n lockds answered and each sees the
// floor at the lowest codec any of them advertises.
func floorReached(sts map[int]api.StatusResponse, n int) bool {
	if len(sts) < n {
		return false
	}
	lowest := uint8(255)
	for _, st := range sts {
		lowest = min(lowest, st.LogCodec)
	}
	for _, st := range sts {
		if st.LogCodecFloor != lowest {
			return false
		}
	}
	return true
}
