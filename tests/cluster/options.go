package cluster

import (
	"time"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// CellSpec is one cell of the cluster: a Raft shard with a replica on every
// process, serving Prefixes.
type CellSpec struct {
	Name     string
	ShardID  uint64
	Prefixes []string
	// Timing is the cell's own timing (api.ParseCellTiming's form, like
	// "heartbeat=500ms,election=5s,lease=30s"); "" for the lockds'.
	Timing string
}

// DefaultCells are the cells of `lockd dev`: demo on /demo, payments on /payments.
var DefaultCells = []CellSpec{
	{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}},
	{Name: "payments", ShardID: 2, Prefixes: []string{"/payments"}},
}

// Options configures a cluster. The zero value is a 5-replica test cluster.
type Options struct {
	// Replicas is 5 (default) or 3: the bootstrap members, which host the
	// directory group and the Cells.
	Replicas int
	// Lockds is the number of lockd processes (default Replicas); those
	// past Replicas join the members and host what the directory places
	// on them.
	Lockds int
	// Zones spreads the lockds over this many zones (--zone z1, z2, …),
	// lockd i in zone (i-1) mod Zones + 1; 0: no zones.
	Zones int
	// BalanceLeaders lets the directory's leader move cells' leaderships
	// to even them out (lockd's default). Off by default here: tests that
	// pick a leader and act on it want it to stay put.
	BalanceLeaders bool
	// RTTMillisecond is the Raft tick (--rtt-ms): heartbeats every tick,
	// elections after 10–20 ticks. Default 20 (elections in 200–400 ms);
	// 100 is production timing.
	RTTMillisecond int
	// Lease is the default session lease (--lease). Default 3s.
	Lease time.Duration
	// Cells default to DefaultCells.
	Cells []CellSpec
	// LogLevel is --log-level; default info.
	LogLevel string
	// ExtraArgs are appended to every `lockd serve` command line.
	ExtraArgs []string
	// ReplicaArgs are appended, after ExtraArgs, to lockd id's command
	// line only (SetReplicaArgs changes them for its next start).
	ReplicaArgs map[int][]string
	// AdminToken turns auth on: every lockd gets it as its bootstrap
	// admin token (--admin-token-file), and the harness sends it.
	AdminToken string
	tokenFile  string // where New wrote it
	// TLS runs every lockd and lockproxy with mutual TLS on the
	// development CAs New makes: the API's, and Raft's (a CA of its own,
	// --raft-tls-*); the harness and NewClient use the API's client
	// certificate. Without it the processes get --plain-http.
	TLS       bool
	tlsNode   tlsutil.Files
	tlsClient tlsutil.Files
	tlsRaft   tlsutil.Files
	// StartTimeout bounds Start: every process healthy and every cell led
	// by a ready leader. Default 60s.
	StartTimeout time.Duration
	// LeaderTimeout bounds LeaderOf. Default 10s.
	LeaderTimeout time.Duration
	// NoWait makes Start return once every process answers /healthz,
	// without waiting for leaders.
	NoWait bool
	// Dir is where data and logs go; by default a fresh temporary directory,
	// removed on Close unless TESTCLUSTER_KEEP=1. A given Dir is never removed.
	Dir string
	// Logf receives the harness's own progress lines (starts, kills, ...).
	Logf func(format string, args ...any)
	// RaftDelay, if set, puts a userspace relay (tests/cluster/relay, one
	// delayrelay process per replica, in its namespace with Network) in
	// front of every replica's Raft port that delays each chunk by Min to
	// Max in each direction: a cluster whose replicas are as far apart as
	// regions. Client traffic is not delayed.
	RaftDelay Delay
	// Network, if set, places every replica on its own host address and
	// wraps its command line (the chaos suite runs each replica in its own
	// network namespace: see Netns). Nil: every replica on 127.0.0.1.
	Network Network
}

func (o Options) withDefaults() Options {
	if o.Replicas == 0 {
		o.Replicas = 5
	}
	if o.RTTMillisecond == 0 {
		o.RTTMillisecond = 20
	}
	if o.Lease == 0 {
		o.Lease = 3 * time.Second
	}
	if len(o.Cells) == 0 {
		o.Cells = DefaultCells
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.LeaderTimeout == 0 {
		o.LeaderTimeout = 10 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}
