package etcdgw

import (
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errLeaseNotFound answers a lease that is unknown here or bound to
// another credential: the two are never told apart.
var errLeaseNotFound = rpctypes.ErrGRPCLeaseNotFound

// errBadLeaseID refuses a negative lease id.
var errBadLeaseID = status.Error(codes.InvalidArgument, "etcdserver: lease id must be positive (0: the gateway picks one)")

// errForeignLeaseID refuses a chosen lease id whose tag bits name another
// gateway.
var errForeignLeaseID = status.Error(codes.InvalidArgument, "lockd etcd gateway: a chosen lease id must be below 2^47 or carry this gateway's tag (bits 47..62 name the granting gateway); 0: the gateway picks one")

// errNoLockLease refuses a Lock without a lease.
var errNoLockLease = status.Error(codes.InvalidArgument, "lockd etcd gateway: Lock needs a lease (grant one and pass its id): the lock node lives as long as the lease")

// errForeignLease answers an id another gateway granted (its tag is not
// this gateway's): not found here, saying why.
func errForeignLease(id int64) error {
	return status.Errorf(codes.NotFound, "etcdserver: requested lease not found: lease %x was granted by another gateway; leases live in the gateway that granted them: send its calls (KeepAlive, Put with it, Revoke) to that gateway", id)
}

// errTooMany refuses a request over a named bound.
func errTooMany(bound string, n int, what string) error {
	return status.Errorf(codes.ResourceExhausted, "lockd etcd gateway: %s (%d %s) reached", bound, n, what)
}
