package etcdgw

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// clusterID is the etcd cluster id every gateway answers: one id for
// the whole service (its members are the lockproxies serving etcd).
var clusterID = memberID("lockd etcd gateway")

// header is the response header of an answer read or written on p's
// cell at index: the revision is rev(epoch, index) (revision.go). The
// raft term is the prefix's directory epoch: it rises with each move,
// as a term does, and is not the cell's Raft term (docs/etcd.md).
func (g *Gateway) header(p PrefixInfo, index uint64) *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: clusterID,
		MemberId:  g.memberID,
		Revision:  rev(p.Epoch, index),
		RaftTerm:  p.Epoch,
	}
}

// plainHeader is the header of an answer that touches no cell.
func (g *Gateway) plainHeader() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: clusterID, MemberId: g.memberID}
}
