// Package lockd is one lockd process: a dragonboat NodeHost hosting a replica
// of every configured cell, and the HTTP API in front of them.
package lockd

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4/config"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/server/audit"
)

// Peer is one lockd of the cluster.
type Peer struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}

// CellConfig is a bootstrap cell: a Raft shard with a replica on every
// peer, written into the directory when the cluster is first started.
type CellConfig struct {
	Name     string   `json:"name"`
	ShardID  uint64   `json:"shard_id"`
	Prefixes []string `json:"prefixes"`
	Epoch    uint64   `json:"epoch,omitempty"` // directory epoch, default 1
	// Timing is the cell's own timing (ParseCellTiming); zero: defaults.
	Timing api.CellTiming `json:"timing"`
}

// Config is a lockd's configuration. Every lockd of a cluster has the same
// Peers and Cells. Peers are the bootstrap members (3 or 5): they host the
// directory group and the bootstrap Cells. ReplicaID is this lockd's id:
// one of the Peers, or another lockd that joins them (then RaftAddr and
// APIAddr are its own addresses; it registers itself in the directory and
// hosts the replicas the directory places on it).
type Config struct {
	ReplicaID uint64       `json:"replica_id"`
	DataDir   string       `json:"data_dir"`
	Peers     []Peer       `json:"peers"`
	Cells     []CellConfig `json:"cells"`
	RaftAddr  string       `json:"raft_addr,omitempty"`
	// RaftListen is the address Raft binds, if not RaftAddr (the address
	// peers dial: behind NAT, a load balancer, or a relay).
	RaftListen string `json:"raft_listen,omitempty"`
	APIAddr    string `json:"api_addr,omitempty"`
	// Zone is this lockd's failure domain: placement spreads a cell's
	// replicas over zones.
	Zone string `json:"zone,omitempty"`
	// NoLeaderBalance stops this lockd, when it leads the directory group,
	// from moving cells' leaderships to even them out over the lockds.
	NoLeaderBalance bool `json:"no_leader_balance,omitempty"`
	// JSONLog makes this lockd stand for a build from before the binary
	// log codec (tests of rolling upgrades only; lockd serve
	// --log-codec-max 0): it advertises log codec 0 to the directory, and
	// its replicas propose JSON and never raise their cell's codec.
	JSONLog bool `json:"json_log,omitempty"`

	// Lease is the default session lease (spec: 12 s).
	Lease Duration `json:"lease,omitempty"`
	// Pprof serves Go's profiles under /debug/pprof/ on the API port.
	Pprof bool `json:"pprof,omitempty"`
	// RTTMillisecond is one Raft tick. Heartbeats every HeartbeatRTT ticks,
	// elections after a timeout drawn from [ElectionRTT, 2·ElectionRTT) ticks.
	// Defaults 100 ms, 1, 10: heartbeats every 100 ms, elections in 1–2 s.
	RTTMillisecond     uint64 `json:"rtt_ms,omitempty"`
	HeartbeatRTT       uint64 `json:"heartbeat_rtt,omitempty"`
	ElectionRTT        uint64 `json:"election_rtt,omitempty"`
	SnapshotEntries    uint64 `json:"snapshot_entries,omitempty"`
	CompactionOverhead uint64 `json:"compaction_overhead,omitempty"`
	// LogDB is dragonboat's LogDB memory preset: tiny (≤256 MB), small
	// (≤1 GB), medium (≤4 GB) or large (≤8 GB).
	LogDB string `json:"logdb,omitempty"`
	// MemoryLimitMB is the Go runtime's soft memory limit (0: the
	// default, DefaultMemoryLimitMB); GCPercent its GC target (0: the
	// default, DefaultGCPercent; -1: collect only at the limit). memory.go.
	MemoryLimitMB int `json:"memory_limit_mb,omitempty"`
	GCPercent     int `json:"gc_percent,omitempty"`
	// TimerSlackUS is the OS timer slack lockd serve runs every thread
	// with, in µs (0: the default, timerslack.DefaultUS; -1: the OS's own,
	// untouched). timerslack.go.
	TimerSlackUS int `json:"timer_slack_us,omitempty"`
	// DeploymentID keeps unrelated clusters on one network from talking.
	DeploymentID uint64 `json:"deployment_id,omitempty"`
	// BackupDir is the backup store (server/backup.Dir): where exported
	// snapshots of the cells this lockd leads go, every BackupEvery and on
	// lockctl backup. Empty: no backups from this lockd.
	BackupDir   string   `json:"backup_dir,omitempty"`
	BackupEvery Duration `json:"backup_every,omitempty"`
	// AuditFile is the audit log's file (server/audit): one JSON record a
	// line, rotated past AuditMaxMB with AuditKeep old files kept. Empty:
	// the audit records go to the process's log only.
	AuditFile  string `json:"audit_file,omitempty"`
	AuditMaxMB int    `json:"audit_max_mb,omitempty"`
	AuditKeep  int    `json:"audit_keep,omitempty"`
	// AdminTokenFile turns authentication on: every API request then
	// needs a token, this file's (the cluster's bootstrap admin, which the
	// lockds also use with each other) or a tenant's. Empty: no auth
	// (development only).
	AdminTokenFile string `json:"admin_token_file,omitempty"`
	// TLSCert, TLSKey and TLSCA: this lockd's API certificate (server and
	// client use: lockds call each other's API), its key, and the API's
	// CA. Clients must present a certificate the CA signed.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	TLSCA   string `json:"tls_ca,omitempty"`
	// RaftTLSCert, RaftTLSKey and RaftTLSCA: this lockd's Raft
	// certificate (server and client use), its key, and the Raft CA, a
	// CA of its own that signs only lockds' Raft certificates: Raft
	// (dragonboat's mutual TLS) takes no certificate the API's CA signs,
	// such as the applications'. Required with the API's TLS files; the
	// Raft CA must not be the API's (Validate).
	RaftTLSCert string `json:"raft_tls_cert,omitempty"`
	RaftTLSKey  string `json:"raft_tls_key,omitempty"`
	RaftTLSCA   string `json:"raft_tls_ca,omitempty"`
	// PlainHTTP runs the API and Raft without TLS: development only, and
	// only when asked for.
	PlainHTTP bool `json:"plain_http,omitempty"`
}

// TLSFiles are the TLS flags as one value.
func (c Config) TLSFiles() tlsutil.Files {
	return tlsutil.Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSCA}
}

// RaftTLSFiles are the Raft TLS flags as one value.
func (c Config) RaftTLSFiles() tlsutil.Files {
	return tlsutil.Files{Cert: c.RaftTLSCert, Key: c.RaftTLSKey, CA: c.RaftTLSCA}
}

// ReadToken reads a token file: its first line, trimmed.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	if len(tok) < 16 {
		return "", fmt.Errorf("token file %s: the token is %d characters, at least 16 needed", path, len(tok))
	}
	return tok, nil
}

// Duration is a time.Duration that reads and writes JSON as "12s".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "12s" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		*d = Duration(v)
		return err
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: %s", b)
	}
	*d = Duration(n)
	return nil
}

// LoadConfig reads a JSON config file.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// withDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.Lease == 0 {
		c.Lease = Duration(api.DefaultLease)
	}
	if c.RTTMillisecond == 0 {
		c.RTTMillisecond = 100
	}
	if c.HeartbeatRTT == 0 {
		c.HeartbeatRTT = 1
	}
	if c.ElectionRTT == 0 {
		c.ElectionRTT = 10
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 100_000
	}
	if c.CompactionOverhead == 0 {
		c.CompactionOverhead = c.SnapshotEntries / 10
	}
	if c.LogDB == "" {
		c.LogDB = "small"
	}
	for i := range c.Cells {
		if c.Cells[i].Epoch == 0 {
			c.Cells[i].Epoch = 1
		}
	}
	return c
}

// Validate checks a config with defaults applied.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("config: no data dir")
	}
	if len(c.Peers) != 3 && len(c.Peers) != 5 {
		return fmt.Errorf("config: %d peers; a cell has 5 replicas (3 allowed)", len(c.Peers))
	}
	ids := map[uint64]bool{}
	for _, p := range c.Peers {
		if p.ID == 0 || ids[p.ID] {
			return fmt.Errorf("config: peer id %d is zero or repeated", p.ID)
		}
		if p.RaftAddr == "" || p.APIAddr == "" {
			return fmt.Errorf("config: peer %d needs raft and api addresses", p.ID)
		}
		ids[p.ID] = true
	}
	if c.ReplicaID == 0 {
		return fmt.Errorf("config: no lockd id")
	}
	if !ids[c.ReplicaID] && (c.RaftAddr == "" || c.APIAddr == "") {
		return fmt.Errorf("config: lockd %d is not among the peers: give its own --raft-addr and --api-addr to join them", c.ReplicaID)
	}
	if lease := time.Duration(c.Lease); lease < api.MinLease || lease > api.MaxLease {
		return fmt.Errorf("config: lease %v outside [%v, %v]", lease, api.MinLease, api.MaxLease)
	}
	if _, err := logDBConfig(c.LogDB); err != nil {
		return err
	}
	if _, err := memoryFor(c); err != nil {
		return err
	}
	if _, err := TimerSlackFor(c); err != nil {
		return err
	}
	if err := audit.CheckOptions(c.auditOptions()); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return c.validateTLS()
}

// validateTLS checks the TLS files: the API's and Raft's, all or none
// (--plain-http), Raft's on a CA of its own.
func (c Config) validateTLS() error {
	if err := c.TLSFiles().Check(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	raft := c.RaftTLSFiles()
	if raft.Set() && (raft.Cert == "" || raft.Key == "" || raft.CA == "") {
		return fmt.Errorf("config: Raft TLS needs a certificate, its key and the Raft CA (--raft-tls-cert, --raft-tls-key, --raft-tls-ca)")
	}
	if c.PlainHTTP {
		if c.TLSFiles().Set() || raft.Set() {
			return fmt.Errorf("config: --plain-http and TLS files both given")
		}
		return nil
	}
	if !c.TLSFiles().Set() {
		return fmt.Errorf("config: no TLS: give --tls-cert, --tls-key and --tls-ca, and --raft-tls-cert, --raft-tls-key and --raft-tls-ca (lockd certs makes a development set), or --plain-http to run without (development only)")
	}
	if !raft.Set() {
		return fmt.Errorf("config: the API runs TLS but Raft has no TLS files: give --raft-tls-cert, --raft-tls-key and --raft-tls-ca, a Raft certificate signed by a CA of its own that signs only lockds (lockd certs makes raft.pem and raft-ca.pem); Raft must not take the certificates the API's CA signs for applications")
	}
	if err := tlsutil.DistinctCAs(c.TLSCA, c.RaftTLSCA); err != nil {
		return fmt.Errorf("config: --raft-tls-ca: %w; Raft needs a CA of its own, else it takes every application's client certificate", err)
	}
	return nil
}

// Self returns this lockd's addresses.
func (c Config) Self() Peer {
	for _, p := range c.Peers {
		if p.ID == c.ReplicaID {
			return p
		}
	}
	return Peer{ID: c.ReplicaID, RaftAddr: c.RaftAddr, APIAddr: c.APIAddr}
}

// Member reports whether this lockd is a bootstrap member (hosts the
// directory group).
func (c Config) Member() bool {
	for _, p := range c.Peers {
		if p.ID == c.ReplicaID {
			return true
		}
	}
	return false
}

func logDBConfig(name string) (config.LogDBConfig, error) {
	switch name {
	case "tiny":
		return config.GetTinyMemLogDBConfig(), nil
	case "small":
		return config.GetSmallMemLogDBConfig(), nil
	case "medium":
		return config.GetMediumMemLogDBConfig(), nil
	case "large":
		return config.GetDefaultLogDBConfig(), nil
	}
	return config.LogDBConfig{}, fmt.Errorf("config: logdb %q is not tiny, small, medium or large", name)
}

// ParsePeer parses "ID,RAFT_ADDR,API_ADDR".
func ParsePeer(s string) (Peer, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return Peer{}, fmt.Errorf("peer %q: want ID,RAFT_ADDR,API_ADDR", s)
	}
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return Peer{}, fmt.Errorf("peer %q: bad id", s)
	}
	return Peer{ID: id, RaftAddr: f[1], APIAddr: f[2]}, nil
}

// ParseCell parses "NAME,SHARD_ID,PREFIX[+PREFIX...][,TIMING...]", the
// timing as api.ParseCellTiming reads it ("heartbeat=500ms,election=5s").
func ParseCell(s string) (CellConfig, error) {
	f := strings.Split(s, ",")
	if len(f) < 3 {
		return CellConfig{}, fmt.Errorf("cell %q: want NAME,SHARD_ID,PREFIX[+PREFIX][,heartbeat=D,election=D,lease=D,keepalive=D,grace=D]", s)
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return CellConfig{}, fmt.Errorf("cell %q: bad shard id", s)
	}
	t, err := api.ParseCellTiming(strings.Join(f[3:], ","))
	if err != nil {
		return CellConfig{}, fmt.Errorf("cell %q: %w", s, err)
	}
	return CellConfig{Name: f[0], ShardID: id, Prefixes: strings.Split(f[2], "+"), Timing: t}, nil
}
