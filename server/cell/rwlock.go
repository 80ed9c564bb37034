package cell

// Read-write lock mode changes (downgrade, upgrade) and the codec gate
// of issue 26's lock vocabulary: the upgradable mode, container
// directories and set_lock_mode (server/fsm/rwlock.go, container.go).

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// rwCreateGate refuses, before proposing, a create that uses the
// upgradable lock mode or marks containers on a cell whose log codec
// some replica may not decode (codec_too_old).
func (c *Cell) rwCreateGate(req *api.CreateRequest) error {
	switch {
	case req.Lock == api.LockUpgradable:
		return errOrNil(fsm.NeedCodec(c.LogCodec(), fsm.LogCodecV2, "an upgradable read lock"))
	case req.Container:
		return errOrNil(fsm.NeedCodec(c.LogCodec(), fsm.LogCodecV2, "a container directory"))
	}
	return nil
}

// stageGate refuses, before proposing, a staged page of a prefix move
// that carries a container directory onto a cell whose log codec some
// replica may not decode (codec_too_old): a replica of an older build
// would drop the mark (JSON) or the whole entry (binary), and diverge.
func (c *Cell) stageGate(req *api.PrefixOpRequest) error {
	if req.Op != api.PrefixStage || mutant.On(mutant.StageContainerUngated) {
		return nil
	}
	for i := range req.Nodes { // at most an export page (MaxExportPage)
		if req.Nodes[i].Container {
			return errOrNil(fsm.NeedCodec(c.LogCodec(), fsm.LogCodecV2, "a prefix with container directories"))
		}
	}
	return nil
}

// errOrNil keeps a nil *api.Error a nil error.
func errOrNil(err *api.Error) error {
	if err == nil {
		return nil
	}
	return err
}

// SetLockMode changes the mode of the caller's session's lock node in
// place: a downgrade or an upgrade (api.LockModeRequest). A lock node is
// ephemeral, never cached: no invalidation round. The cell arms, in the
// same apply, the deletion watch on what an upgrade waits for (afterApply).
func (c *Cell) SetLockMode(ctx context.Context, req api.LockModeRequest, who Caller) (api.LockModeResponse, error) {
	what := "a lock downgrade"
	if req.Mode == api.LockExclusive {
		what = "a lock upgrade"
	}
	if err := fsm.NeedCodec(c.LogCodec(), fsm.LogCodecV2, what); err != nil {
		return api.LockModeResponse{}, err
	}
	if !req.Mode.Valid() || req.Mode == api.LockNone {
		return api.LockModeResponse{}, api.Errorf(api.CodeBadRequest, "unknown lock mode %q", req.Mode)
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{Op: fsm.OpSetLockMode, WriteHeader: req.WriteHeader, Path: req.Path, Lock: req.Mode}))
	if err != nil {
		return api.LockModeResponse{}, err
	}
	return api.LockModeResponse{Node: *res.Node, Index: res.Index, Token: res.Token, WaitFor: res.WaitFor}, nil
}
