package lockd

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/dirfsm"
	"github.com/lockservice/lockd/server/fsm"
)

// The log codec floor on the lockd's side (server/dirfsm codecfloor.go):
// each lockd advertises the highest log codec it decodes when it
// registers; the directory's leader raises the floor once every lockd
// advertises more; the cells follow the floor (cell.Placement.LogCodec);
// and a lockd below the floor hosts no replica.

// NewestLogCodec is the highest log codec this build decodes.
const NewestLogCodec = uint8(fsm.LogCodecNewest)

// LogCodec is the highest log codec this lockd decodes, as it advertises
// it (0 when it stands for a build from before the binary codec).
func (c Config) LogCodec() uint8 {
	if c.JSONLog {
		return uint8(fsm.LogCodecJSON)
	}
	return NewestLogCodec
}

// selfInfo is this lockd as it registers with the directory.
func (p *Process) selfInfo() api.LockdInfo {
	self := p.cfg.Self()
	return api.LockdInfo{ID: self.ID, RaftAddr: self.RaftAddr, APIAddr: self.APIAddr, Zone: p.cfg.Zone, LogCodec: p.cfg.LogCodec()}
}

// belowFloor reports whether view's floor is above what this lockd
// decodes: then it must host no replica (its cells' logs may hold
// entries it cannot read), and its registration is refused.
func (p *Process) belowFloor(view *directory.Directory) bool {
	return view.LogCodec() > p.cfg.LogCodec()
}

// raiseCodecFloor, on the directory's leader, proposes raise_codec once
// every registered lockd advertises a codec above the floor (the state
// machine checks it again: a lockd registering meanwhile refuses it).
func (p *Process) raiseCodecFloor(view *directory.Directory) {
	if p.dir == nil {
		return
	}
	if lead, ok := p.dir.Leader(); !ok || lead != p.cfg.ReplicaID {
		return
	}
	to, due := dirfsm.CodecFloorDue(view.Response().Lockds, view.LogCodec())
	if !due {
		return
	}
	p.log.Info("raising the log codec floor: every lockd decodes it", "from", view.LogCodec(), "to", to)
	p.proposeBackground(&dirfsm.Command{Op: dirfsm.OpRaiseCodec, Codec: to})
}

// leaveCells stops every replica this lockd runs, because view's floor is
// above the codec it decodes (cellsMu held). They stay on record
// (replicas.json): the same lockd upgraded resumes them.
func (p *Process) leaveCells(view *directory.Directory) error {
	for name, c := range p.cells {
		shard, replica := c.Info().ShardID, c.ReplicaID()
		unloaded := p.unloads.expect(shard, replica)
		stopped, err := c.Stop()
		if err != nil {
			p.log.Warn("stopping a replica below the log codec floor", "cell", name, "err", err)
		}
		p.unloads.stopped(shard, replica, unloaded, stopped)
		delete(p.cells, name)
		p.listener.unregister(shard)
		for _, col := range p.cellMetrics[name] {
			p.metrics.Unregister(col)
		}
		delete(p.cellMetrics, name)
		p.log.Error("replica stopped: this lockd cannot read its cell's log", "cell", name, "log_codec", p.cfg.LogCodec(), "floor", view.LogCodec())
	}
	return api.Errorf(api.CodeCodecTooOld, "this lockd decodes log codec %d, the cluster writes %d: upgrade it", p.cfg.LogCodec(), view.LogCodec())
}
