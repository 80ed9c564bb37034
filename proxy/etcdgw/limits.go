package etcdgw

import "github.com/lockservice/lockd/api"

// Bounds of the gateway (docs/etcd.md, "Bounds").
const (
	// MaxRequestBytes bounds one gRPC message a client sends: etcd's own
	// default request limit (1.5 MiB) plus a margin for the envelope, so
	// a request etcd would take is never refused here for its size
	// (values are still bounded by api.MaxValueSize).
	MaxRequestBytes = 3<<19 + 512<<10
	// MaxStreamsPerConn bounds the concurrent calls and streams of one
	// client connection (watch and keep-alive streams are long lived).
	MaxStreamsPerConn = 1024
	// MaxTokenBytes bounds the etcd auth token read from gRPC metadata:
	// an API token is far shorter; a longer one is refused unread.
	MaxTokenBytes = 1024
	// MaxSortFetch bounds the keys a range sorted other than by key
	// ascending reads in order to sort them: api.MaxRangeKeys, one range
	// answer. A larger range with such a sort is refused
	// ResourceExhausted.
	MaxSortFetch = api.MaxRangeKeys
	// MaxDeleteRangeKeys bounds the keys one range delete removes: the
	// deletes go in one /v1/txn (api.MaxTxnOps).
	MaxDeleteRangeKeys = api.MaxTxnOps
	// MaxTxnOps bounds an etcd Txn's operations in one branch, and
	// MaxTxnCompares its compares: api's transaction bounds.
	MaxTxnOps      = api.MaxTxnOps
	MaxTxnCompares = api.MaxTxnConds
	// MaxTxnReads bounds the ranges one etcd Txn branch reads after
	// its writes.
	MaxTxnReads = 64
	// MaxWriteRetries bounds how often a read-then-write (ignore_value,
	// ignore_lease, prev_kv) retries when the key changed in between.
	MaxWriteRetries = 8
)
