package lockd

import (
	"sync"

	"github.com/lni/dragonboat/v4/raftio"

	"github.com/lockservice/lockd/server/cell"
)

// leaderEvents routes the NodeHost's leader updates to cells. Updates that
// arrive before a cell registers are kept and replayed.
type leaderEvents struct {
	mu    sync.Mutex
	cells map[uint64]*cell.Cell
	last  map[uint64]raftio.LeaderInfo
}

func (l *leaderEvents) LeaderUpdated(info raftio.LeaderInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[info.ShardID] = info
	if c, ok := l.cells[info.ShardID]; ok {
		c.LeaderUpdated(info)
	}
}

func (l *leaderEvents) unregister(shardID uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cells, shardID)
}

func (l *leaderEvents) register(shardID uint64, c *cell.Cell) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cells[shardID] = c
	if info, ok := l.last[shardID]; ok {
		c.LeaderUpdated(info)
	}
}
