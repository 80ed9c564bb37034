package cell

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// A replica remembers the latest leaders it saw, newest first, once per
// term and leader, at most api.MaxLeaderChanges; an unknown leader is not
// a change.
func TestLeaderChangesBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r recentState
	r.sawLeader(t0, 1, 0)
	r.sawLeader(t0, 1, 3)
	r.sawLeader(t0.Add(time.Second), 1, 3)
	if got := r.leaderChanges(); len(got) != 1 || got[0].Term != 1 || got[0].LeaderID != 3 || got[0].AtMS != t0.UnixMilli() {
		t.Fatalf("after one election: %+v", got)
	}
	for term := uint64(2); term < 20; term++ {
		r.sawLeader(t0.Add(time.Duration(term)*time.Second), term, term%5+1)
	}
	got := r.leaderChanges()
	if len(got) != api.MaxLeaderChanges || got[0].Term != 19 || got[len(got)-1].Term != 19-api.MaxLeaderChanges+1 {
		t.Fatalf("after many: %+v", got)
	}
}
