package etcdgw

import (
	"sync"
	"sync/atomic"

	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// keepAliveStreams counts the open LeaseKeepAlive streams of every
// gateway in the process, against MaxKeepAliveStreams.
var keepAliveStreams atomic.Int64

// maxKeepAlivesInFlight bounds the KeepAlives one stream renews at once:
// an etcd client sends every lease's KeepAlives on one stream, and one
// slow renewal must not hold up the others'. Past it the stream stops
// reading until one finishes.
const maxKeepAlivesInFlight = 64

// LeaseKeepAlive renews, for each request on the stream, every session
// of the caller's lease through the proxy's KeepAlive path, and answers
// the TTL left (lease_ttl.go): 0 for a lease unknown here, bound to
// another credential or lost, as etcd answers a lease that is gone (the
// client's KeepAlive channel closes). A lease another gateway granted
// is renewed there (forward.go). The stream ends when the client
// closes it or its context ends.
func (s *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	ctx := stream.Context()
	w, err := s.g.who(ctx)
	if err != nil {
		return err
	}
	tenant := tenantOf(w)
	if !mutant.On(mutant.EtcdKeepAliveCap) {
		if !s.g.counts.take(countKeepAliveStreams, tenant, MaxKeepAliveStreamsPerTenant) {
			return errTooMany("MaxKeepAliveStreamsPerTenant", MaxKeepAliveStreamsPerTenant, "open LeaseKeepAlive streams of one tenant")
		}
		defer s.g.counts.give(countKeepAliveStreams, tenant)
	}
	if keepAliveStreams.Add(1) > MaxKeepAliveStreams {
		keepAliveStreams.Add(-1)
		return errTooMany("MaxKeepAliveStreams", MaxKeepAliveStreams, "open LeaseKeepAlive streams")
	}
	defer keepAliveStreams.Add(-1)
	var (
		sendMu sync.Mutex // a stream's Send is not safe for concurrent use
		wg     sync.WaitGroup
		slots  = make(chan struct{}, maxKeepAlivesInFlight)
	)
	defer wg.Wait()
	for ctx.Err() == nil {
		r, err := stream.Recv()
		if err != nil {
			return nil // the client closed the stream, or it broke
		}
		slots <- struct{}{}
		wg.Add(1)
		go func(id int64) {
			defer func() { <-slots; wg.Done() }()
			ttl, answer := int64(0), true
			if foreignLease(id, s.g.leases.tag) {
				ttl, answer = s.g.forwardKeepAlive(ctx, w, id) // forward.go
			} else {
				ttl = s.g.leases.renew(ctx, w, id)
			}
			if !answer {
				return // its gateway cannot be asked now: the client asks again
			}
			sendMu.Lock()
			defer sendMu.Unlock()
			_ = stream.Send(&pb.LeaseKeepAliveResponse{Header: s.g.plainHeader(), ID: id, TTL: ttl})
		}(r.ID)
	}
	return nil
}
