package etcdgw

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Campaign makes the lease's candidate (or finds the one it made
// before: a retried Campaign resumes, as etcd's does), then waits until
// no candidate was created before it: each round waits for its
// predecessor's delete on the change feed, then reads the election
// again. A canceled Campaign deletes its candidate (etcd resigns it).
func (s *electionServer) Campaign(ctx context.Context, r *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	g := s.g
	e, err := g.electionOf(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	tenant := e.w.caller.Tenant()
	if !g.counts.take(countCampaigners, tenant, MaxCampaigners) {
		return nil, status.Errorf(codes.ResourceExhausted, "lockd etcd gateway: this tenant has %d campaigns waiting at this gateway (MaxCampaigners)", MaxCampaigners)
	}
	defer g.counts.give(countCampaigners, tenant)
	hdr, err := g.leases.session(ctx, e.w, r.Lease, e.name.Prefix)
	if err != nil {
		return nil, grpcError(err)
	}
	mine, err := g.candidate(ctx, e, hdr, r.Lease, r.Value)
	if err != nil {
		return nil, grpcError(err)
	}
	index, epoch, err := g.waitFirst(ctx, e, mine)
	if err != nil {
		if ctx.Err() != nil {
			g.withdraw(e, r.Lease, mine)
		}
		return nil, grpcError(err)
	}
	return &v3electionpb.CampaignResponse{
		Header: g.header(e.prefixAt(epoch), index),
		Leader: &v3electionpb.LeaderKey{Name: r.Name, Key: g.keys.key(mine.Path, e.name.Rel), Rev: rev(epoch, mine.CreateIndex), Lease: r.Lease},
	}, nil
}

// candidate is the session's candidate of e: the one it has (its value
// set to value) or a new ephemeral sequential child.
func (g *Gateway) candidate(ctx context.Context, e election, hdr api.WriteHeader, lease int64, value []byte) (api.Node, error) {
	resp, err := g.candidates(ctx, e, false)
	if err != nil {
		return api.Node{}, err
	}
	for _, n := range resp.Nodes {
		if n.Ephemeral && n.Owner == hdr.Session {
			if string(n.Value) == string(value) {
				return n, nil
			}
			var w api.WriteResponse
			err := g.be.Call(ctx, e.w.token, api.RoutePut, &api.PutRequest{WriteHeader: hdr, Path: n.Path, Value: value}, &w)
			return w.Node, err
		}
	}
	req := &api.CreateRequest{WriteHeader: hdr, Path: e.name.Path + "/" + candidateName(lease), Value: value,
		Ephemeral: true, Sequential: true, MakeParents: true, Container: true}
	var c api.CreateResponse
	if err := g.be.Call(ctx, e.w.token, api.RouteCreate, req, &c); err != nil {
		return api.Node{}, err
	}
	return c.Node, nil
}

// waitFirst waits until mine is the election's first candidate: the
// index and epoch of the read that saw it. Each round needs a
// predecessor's delete; rounds end with ctx.
func (g *Gateway) waitFirst(ctx context.Context, e election, mine api.Node) (uint64, uint64, error) {
	for ctx.Err() == nil {
		resp, err := g.candidates(ctx, e, true)
		if err != nil {
			return 0, 0, err
		}
		if !hasPath(resp.Nodes, mine.Path) {
			return 0, 0, errCandidateGone
		}
		pred := predecessorOf(resp.Nodes, mine.CreateIndex)
		if pred == nil {
			return resp.Index, resp.Epoch, nil
		}
		if err := g.changes.waitGone(ctx, e.prefixAt(resp.Epoch), pred.Path, resp.Index); err != nil && !errors.Is(err, errFeedMoved) {
			return 0, 0, err
		}
	}
	return 0, 0, ctx.Err()
}

func hasPath(nodes []api.Node, path string) bool {
	for _, n := range nodes {
		if n.Path == path {
			return true
		}
	}
	return false
}

// withdraw deletes the candidate of a canceled Campaign.
func (g *Gateway) withdraw(e election, lease int64, mine api.Node) {
	ctx, cancel := context.WithTimeout(g.ctx, campaignCleanup)
	defer cancel()
	hdr, err := g.leases.session(ctx, e.w, lease, e.name.Prefix)
	if err == nil {
		// The candidate is the session's own (a sequential name is never
		// reused): a plain delete by that session.
		var w api.WriteResponse
		err = g.be.Call(ctx, e.w.token, api.RouteDelete, &api.DeleteRequest{WriteHeader: hdr, Path: mine.Path}, &w)
	}
	if err != nil && api.CodeOf(err) != api.CodeNoNode {
		g.log.Info("etcd election: a canceled campaign's candidate is left to its lease", "key", mine.Path, "err", err)
	}
}

// Observe streams the leader's key-value at every change of leader or
// of its value: at once if there is a leader, then after every change
// the feed reports under the election (re-read at least every
// ObserveRecheckInterval).
func (s *electionServer) Observe(r *v3electionpb.LeaderRequest, srv v3electionpb.Election_ObserveServer) error {
	g := s.g
	ctx := srv.Context()
	e, err := g.electionOf(ctx, r.Name)
	if err != nil {
		return err
	}
	tenant := e.w.caller.Tenant()
	if !g.counts.take(countObservers, tenant, MaxObservers) {
		return status.Errorf(codes.ResourceExhausted, "lockd etcd gateway: this tenant has %d observers at this gateway (MaxObservers)", MaxObservers)
	}
	defer g.counts.give(countObservers, tenant)
	var last api.Node
	for ctx.Err() == nil {
		resp, err := g.candidates(ctx, e, false)
		if err != nil {
			return grpcError(err)
		}
		if l := leaderOf(resp.Nodes); l != nil && (l.Path != last.Path || l.ModifyIndex != last.ModifyIndex) {
			last = *l
			if err := srv.Send(&v3electionpb.LeaderResponse{Header: g.header(e.prefixAt(resp.Epoch), resp.Index), Kv: g.electionKV(e, resp.Epoch, *l)}); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, ObserveRecheckInterval)
		_, err = g.changes.waitChange(wctx, e.prefixAt(resp.Epoch), e.name.Path+"/", e.name.Path+"0", resp.Index)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return grpcError(fmt.Errorf("observe %s: %w", e.name.Path, err))
		}
	}
	return ctx.Err()
}
