package dirfsm

import (
	"encoding/json"
	"fmt"

	"github.com/lockservice/lockd/api"
)

// Ops of the directory group's log.
const (
	OpBootstrap  = "bootstrap"
	OpRegister   = "register"
	OpCreateCell = "create_cell"
	OpAssign     = "assign"
	OpMigrate    = "migrate"
	OpMember     = "member"
	OpRestore    = "restore"
	// OpRegisterProxy records a lockproxy (by name; a new address
	// replaces the old).
	OpRegisterProxy = "register_proxy"
	// OpTenant creates, changes or deletes a tenant (TenantChange).
	OpTenant = "tenant"
	// OpRaiseCodec raises the cluster's log codec floor to Codec, once
	// every registered lockd decodes it (codecfloor.go).
	OpRaiseCodec = "raise_codec"
)

// Command is one entry of the directory group's log.
type Command struct {
	Op         string                   `json:"op"`
	Bootstrap  *Bootstrap               `json:"bootstrap,omitempty"`
	Lockd      *api.LockdInfo           `json:"lockd,omitempty"`
	CreateCell *api.CreateCellRequest   `json:"create_cell,omitempty"`
	Assign     *api.AssignPrefixRequest `json:"assign,omitempty"`
	Migrate    *api.MigrateRequest      `json:"migrate,omitempty"`
	Member     *api.MemberRequest       `json:"member,omitempty"`
	Restore    *api.RestoreCellRequest  `json:"restore,omitempty"`
	Proxy      *api.ProxyInfo           `json:"proxy,omitempty"`
	Tenant     *TenantChange            `json:"tenant,omitempty"`
	// Codec: for raise_codec, the floor it raises to.
	Codec uint8 `json:"codec,omitempty"`
	// AtMS is the proposing lockd's wall clock (Unix ms) when it made the
	// command: a migrate begin records it as the move's start (for the
	// age health reports). 0 from a lockd before it: not recorded. A
	// directory replica before it ignores it (keeps 0): a mixed-version
	// group may disagree on this one field, which feeds only the health
	// report, never a decision of the state.
	AtMS int64 `json:"at_ms,omitempty"`
}

// Encode serialises a command for the log.
func (c *Command) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("directory: encode command: %v", err)) // plain types only
	}
	return b
}

// Result is what applying a command returns to its proposer.
type Result struct {
	Err    *api.Error      `json:"err,omitempty"`
	Index  uint64          `json:"index"`
	Cell   *api.CellInfo   `json:"cell,omitempty"`
	Prefix *api.PrefixInfo `json:"prefix,omitempty"`
	Tenant *api.Tenant     `json:"tenant,omitempty"`
}

// State is the directory group's replicated state: pure and
// deterministic, like a cell's (no clock, no randomness, no I/O).
type State struct {
	index     uint64
	lockds    map[uint64]api.LockdInfo
	cells     map[string]*cellRec
	prefixes  map[string]*api.PrefixInfo
	dirLockds []uint64
	nextShard uint64
	proxies   map[string]api.ProxyInfo // by name
	tenants   map[string]api.Tenant    // by name
	// codecFloor is the cluster's log codec floor (codecfloor.go): only
	// raised, and a lockd decoding less is refused registration.
	codecFloor uint8
}

// NewState returns an empty directory.
func NewState() *State {
	return &State{lockds: map[uint64]api.LockdInfo{}, cells: map[string]*cellRec{}, prefixes: map[string]*api.PrefixInfo{}, nextShard: 1,
		proxies: map[string]api.ProxyInfo{}, tenants: map[string]api.Tenant{}}
}

// Index is the last applied index.
func (s *State) Index() uint64 { return s.index }

// Empty reports whether the directory was never bootstrapped.
func (s *State) Empty() bool { return len(s.lockds) == 0 && len(s.cells) == 0 }

// Apply applies one entry committed at index and returns its encoded
// Result. A refused command changes nothing.
func (s *State) Apply(index uint64, data []byte) []byte {
	if index <= s.index {
		panic(fmt.Sprintf("directory: apply index %d after %d", index, s.index))
	}
	s.index = index
	var c Command
	var res Result
	if err := json.Unmarshal(data, &c); err != nil {
		res.Err = api.Errorf(api.CodeBadRequest, "undecodable directory entry: %v", err)
	} else {
		res = s.apply(&c)
	}
	res.Index = index
	b, _ := json.Marshal(&res)
	return b
}

func (s *State) apply(c *Command) Result {
	if s.Empty() && c.Op != OpBootstrap {
		return refuse(api.CodeUnavailable, "the directory is not bootstrapped yet")
	}
	switch {
	case c.Op == OpBootstrap && c.Bootstrap != nil:
		return s.bootstrap(c.Bootstrap)
	case c.Op == OpRegister && c.Lockd != nil:
		return s.register(*c.Lockd)
	case c.Op == OpCreateCell && c.CreateCell != nil:
		return s.createCell(c.CreateCell)
	case c.Op == OpAssign && c.Assign != nil:
		return s.assign(c.Assign)
	case c.Op == OpMigrate && c.Migrate != nil:
		return s.migrate(c.Migrate, c.AtMS)
	case c.Op == OpMember && c.Member != nil:
		return s.member(c.Member)
	case c.Op == OpRestore && c.Restore != nil:
		return s.restore(c.Restore)
	case c.Op == OpRegisterProxy && c.Proxy != nil:
		return s.registerProxy(*c.Proxy)
	case c.Op == OpTenant && c.Tenant != nil:
		return s.tenant(c.Tenant)
	case c.Op == OpRaiseCodec:
		return s.raiseCodec(c.Codec)
	}
	return Result{Err: api.Errorf(api.CodeBadRequest, "unknown or incomplete directory op %q", c.Op)}
}

func refuse(code api.Code, format string, args ...any) Result {
	return Result{Err: api.Errorf(code, format, args...)}
}

func ptr[T any](v T) *T { return &v }
