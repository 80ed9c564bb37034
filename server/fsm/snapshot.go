package fsm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/lockservice/lockd/api"
)

// snapshotFormat is bumped on any incompatible change to the layout below.
const snapshotFormat = 1

// The snapshot is a stream of JSON values: a header, then the sessions in id
// order, then the nodes in path order (a parent sorts before its
// descendants). Maps are never serialised directly, so equal states give
// equal bytes. Derived structure (children, lock order, a session's
// ephemeral set) is rebuilt on restore.
type snapHeader struct {
	Format     int      `json:"format"`
	Index      uint64   `json:"index"`
	Epoch      uint64   `json:"epoch"`
	LeaderID   uint64   `json:"leader_id"`
	LeaderTerm uint64   `json:"leader_term"`
	RootChild  uint64   `json:"root_child_index"`
	ElapsedMS  int64    `json:"leader_elapsed_ms,omitempty"`
	Sessions   int      `json:"sessions"`
	Nodes      int      `json:"nodes"`
	Ended      []uint64 `json:"ended"`
	// Opens is the session-open nonce window, oldest first (absent in
	// snapshots from before it existed: an empty window).
	Opens []snapOpen `json:"opens,omitempty"`
	// KeptDelays are the lock-delays of lock directories deleted in one
	// (lockdelay.go), by path.
	KeptDelays []snapKeptDelay `json:"kept_delays,omitempty"`
	// Codec is the cell's log codec (codecgate.go; absent in snapshots
	// from before it: JSON). Stored dedupe answers are in it.
	Codec LogCodec `json:"log_codec,omitempty"`
	// ContainerSeq is the state's containerSeq (container.go; absent in
	// snapshots from before it: 0).
	ContainerSeq uint64 `json:"container_seq,omitempty"`
	// HandOver is the running leadership's last hand_over (handover.go;
	// absent without one).
	HandOver *snapHandOver `json:"hand_over,omitempty"`
}

type snapOpen struct {
	Nonce   string `json:"n"`
	Session uint64 `json:"s"`
}

type snapSession struct {
	ID         uint64          `json:"id"`
	LeaseMS    int64           `json:"lease_ms"`
	AckedBelow uint64          `json:"acked_below,omitempty"`
	SilentMS   int64           `json:"silent_ms,omitempty"`
	Confirmed  uint64          `json:"confirmed_epoch,omitempty"`
	Caches     bool            `json:"caches,omitempty"`
	Cached     []string        `json:"cached,omitempty"`
	CachedAt   uint64          `json:"cached_epoch,omitempty"`
	Secret     string          `json:"secret,omitempty"`
	Tenant     string          `json:"tenant,omitempty"`
	MaxWatches int             `json:"max_watches,omitempty"`
	Results    []snapReqResult `json:"results,omitempty"`
}

type snapReqResult struct {
	ID     uint64 `json:"id"`
	Result []byte `json:"result"`
}

// snapDelay is a lock directory's lock-delay.
type snapDelay struct {
	Index   uint64 `json:"i"`
	MS      int64  `json:"ms"`
	AtMS    int64  `json:"at,omitempty"`
	KeepSeq uint64 `json:"keep,omitempty"`
}

type snapNode struct {
	Path        string       `json:"p"`
	Value       []byte       `json:"v,omitempty"`
	Version     uint64       `json:"ver"`
	CreateIndex uint64       `json:"ci"`
	ModifyIndex uint64       `json:"mi"`
	ChildIndex  uint64       `json:"chi"`
	Ephemeral   bool         `json:"e,omitempty"`
	Owner       uint64       `json:"o,omitempty"`
	Lock        api.LockMode `json:"l,omitempty"`
	Seq         uint64       `json:"s,omitempty"`
	NextSeq     uint64       `json:"ns,omitempty"`
	DirEpoch    uint64       `json:"de,omitempty"`
	TokenEpoch  uint64       `json:"te,omitempty"`
	PrefixState string       `json:"ps,omitempty"`
	MovedTo     string       `json:"mt,omitempty"`
	SealDir     uint64       `json:"sd,omitempty"`
	Tenant      string       `json:"t,omitempty"`
	LockDelayMS int64        `json:"ld,omitempty"`
	Delay       *snapDelay   `json:"dl,omitempty"`
	DelayEnded  uint64       `json:"dle,omitempty"`
	// Move is the node's part in a prefix move (prefixmove.go).
	Move *snapMove `json:"mv,omitempty"`
	// Permits: a permit lock node's semaphore N (semaphore.go).
	Permits int64 `json:"pm,omitempty"`
	// Container marks a container directory (container.go); TokenIndex,
	// UpgradedAt and UpgradeKeep are a lock node's mode-change fields
	// (rwlock.go).
	Container   bool   `json:"ct,omitempty"`
	TokenIndex  uint64 `json:"ti,omitempty"`
	UpgradedAt  uint64 `json:"ua,omitempty"`
	UpgradeKeep uint64 `json:"uk,omitempty"`
}

// WriteSnapshot writes the whole state to w.
func (s *State) WriteSnapshot(w io.Writer) error {
	f := s.Freeze()
	defer s.Release(f)
	return f.Write(w, nil)
}

// Frozen is the state's snapshot content at one index, taken cheaply so a
// snapshot can be written while applies go on (dragonboat's concurrent
// state machine). Freeze copies the header and the sessions and collects
// the node pointers; the nodes' fields are read while writing. A node that
// changes before it is written first leaves its frozen image in pre
// (State.touch), so Write sees every node as it was at the freeze. Values
// and request results are shared: the state replaces byte slices, never
// changes them.
type Frozen struct {
	header   snapHeader
	sessions []snapSession
	nodes    []*node
	pre      map[*node]snapNode // images of frozen nodes changed since
	replaced bool               // a later Freeze took over: this one is void
}

// Freeze takes the snapshot content of the state as it is now. One freeze
// is live at a time (dragonboat saves one snapshot at a time): a new one
// voids the previous, whose Write then fails rather than mix two states.
// The caller must Release it once written.
func (s *State) Freeze() *Frozen {
	f := &Frozen{header: snapHeader{
		Format: snapshotFormat, Index: s.index, Epoch: s.epoch, LeaderID: s.leaderID, LeaderTerm: s.leaderTerm,
		RootChild: s.root.childIndex, ElapsedMS: s.leaderElapsedMS, Sessions: len(s.sessions), Nodes: len(s.nodes),
		Ended: slices.Clone(s.endedOrder), Codec: s.codec, ContainerSeq: s.containerSeq, HandOver: s.handover.snap(),
	}, pre: map[*node]snapNode{}}
	for _, o := range s.openOrder {
		f.header.Opens = append(f.header.Opens, snapOpen{Nonce: o.nonce, Session: o.session})
	}
	if len(s.lockDelays) > 0 {
		f.header.KeptDelays = s.keptDelays()
	}
	f.sessions = make([]snapSession, 0, len(s.sessions))
	for _, sess := range s.sessions {
		ss := snapSession{ID: sess.id, LeaseMS: sess.leaseMS, AckedBelow: sess.ackedBelow, SilentMS: sess.silentMS, Confirmed: sess.confirmedEpoch, Caches: sess.caches,
			Cached: cachedList(sess), CachedAt: sess.cachedEpoch, Secret: sess.secret, Tenant: sess.tenant, MaxWatches: sess.maxWatches}
		for _, r := range sess.results {
			ss.Results = append(ss.Results, snapReqResult{ID: r.id, Result: r.result})
		}
		f.sessions = append(f.sessions, ss)
	}
	f.nodes = make([]*node, 0, len(s.nodes))
	for _, n := range s.nodes {
		f.nodes = append(f.nodes, n)
	}
	if s.frozen != nil {
		s.frozen.replaced = true
	}
	s.frozen = f
	return f
}

// Release ends f's claim on the state's changes.
func (s *State) Release(f *Frozen) {
	if s.frozen == f {
		s.frozen = nil
	}
}

// touch is called before any change to a node's snapshot fields: if the
// live freeze holds the node, its image at the freeze is kept first.
func (s *State) touch(n *node) {
	f := s.frozen
	if f == nil || n == s.root || n.createIndex > f.header.Index {
		return // no freeze, or the node is newer than it
	}
	if _, ok := f.pre[n]; !ok {
		f.pre[n] = n.image()
	}
}

func (n *node) image() snapNode {
	sn := snapNode{
		Path: n.path, Value: valueView(n.value), Version: n.version, CreateIndex: n.createIndex, ModifyIndex: n.modifyIndex,
		ChildIndex: n.childIndex, Ephemeral: n.ephemeral, Owner: n.owner, Lock: n.lock, Seq: n.seq,
		NextSeq: n.nextSeq, DirEpoch: n.dirEpoch, TokenEpoch: n.tokenEpoch,
		PrefixState: n.prefixState, MovedTo: n.movedTo(), SealDir: n.sealDirIndex(), Tenant: n.tenant,
		LockDelayMS: int64(n.lockDelayMS), DelayEnded: n.delayEnded(), Move: n.move.image(),
		Permits:   int64(n.permits),
		Container: n.container, TokenIndex: n.rareOf().tokenIndex, UpgradedAt: n.rareOf().upgradedAt, UpgradeKeep: n.rareOf().upgradeKeep,
	}
	// A delay is replaced, never changed in place: the image may share it.
	if d := n.delay; d != nil {
		sn.Delay = &snapDelay{Index: d.index, MS: d.ms, AtMS: d.atMS, KeepSeq: d.keepSeq}
	}
	return sn
}

// Index is the last entry the frozen content includes.
func (f *Frozen) Index() uint64 { return f.header.Index }

// ErrFreezeVoid is returned by Write when a later Freeze voided it.
var ErrFreezeVoid = errors.New("fsm: snapshot freeze replaced by a later one")

// writeBatch is how many nodes Write reads per hold of the state.
const writeBatch = 1024

// Write encodes the frozen content: the header, the sessions in id order,
// the nodes in path order. hold, if not nil, is called around each read of
// a batch of nodes and must exclude changes to the state for that long
// (the machine's read lock); encoding happens outside it. Without hold the
// state must not change during Write.
func (f *Frozen) Write(w io.Writer, hold func() (release func())) error {
	sort.Slice(f.sessions, func(i, j int) bool { return f.sessions[i].ID < f.sessions[j].ID })
	// A node's path never changes: sorting needs no hold.
	sort.Slice(f.nodes, func(i, j int) bool { return f.nodes[i].path < f.nodes[j].path })
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(&f.header); err != nil {
		return err
	}
	for i := range f.sessions {
		if err := enc.Encode(&f.sessions[i]); err != nil {
			return err
		}
	}
	batch := make([]snapNode, 0, writeBatch)
	for start := 0; start < len(f.nodes); start += writeBatch {
		batch = batch[:0]
		release := func() {}
		if hold != nil {
			release = hold()
		}
		void := f.replaced
		for _, n := range f.nodes[start:min(start+writeBatch, len(f.nodes))] {
			if img, ok := f.pre[n]; ok {
				batch = append(batch, img)
			} else {
				batch = append(batch, n.image())
			}
		}
		release()
		if void {
			return ErrFreezeVoid
		}
		for i := range batch {
			if err := enc.Encode(&batch[i]); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// ReadSnapshot rebuilds a state from a snapshot written by WriteSnapshot:
// the header, the sessions, the nodes, then the end of the stream and the
// invariants of what was read.
func ReadSnapshot(r io.Reader) (*State, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	h, err := readSnapHeader(dec)
	if err != nil {
		return nil, err
	}
	s := New()
	if err := s.restoreHeader(h); err != nil {
		return nil, err
	}
	for i := 0; i < h.Sessions; i++ {
		if err := s.readSnapSession(dec, i); err != nil {
			return nil, err
		}
	}
	for i := 0; i < h.Nodes; i++ {
		if err := s.readSnapNode(dec, i); err != nil {
			return nil, err
		}
	}
	s.sortLockKids()
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("snapshot has trailing data")
	}
	if err := s.CheckInvariants(); err != nil {
		return nil, fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	s.ring = newChangeRing(s.recoveredFloor()) // changes.go: none seen before the snapshot
	return s, nil
}

// readSnapHeader decodes the header and checks its format.
func readSnapHeader(dec *json.Decoder) (snapHeader, error) {
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("snapshot header: %w", err)
	}
	if h.Format != snapshotFormat {
		return h, fmt.Errorf("snapshot format %d, want %d", h.Format, snapshotFormat)
	}
	return h, nil
}

// restoreHeader sets the state the header carries: indexes, leadership,
// ended sessions, the open-nonce window and the kept lock-delays.
func (s *State) restoreHeader(h snapHeader) error {
	s.index, s.epoch, s.leaderID, s.leaderTerm = h.Index, h.Epoch, h.LeaderID, h.LeaderTerm
	s.root.childIndex = h.RootChild
	s.leaderElapsedMS = h.ElapsedMS
	if h.Codec > LogCodecNewest {
		return fmt.Errorf("snapshot written in log codec %d, newer than this build's %d", h.Codec, LogCodecNewest)
	}
	s.codec = h.Codec
	s.containerSeq = h.ContainerSeq
	var ok bool
	if s.handover, ok = restoreHandOver(h.HandOver); !ok {
		return fmt.Errorf("snapshot's hand-over lists %d sessions and %d silences (at most %d)", len(h.HandOver.Sessions), len(h.HandOver.SilentMS), MaxHandOverSessions)
	}
	for _, id := range h.Ended {
		s.ended[id] = struct{}{}
	}
	s.endedOrder = append([]uint64(nil), h.Ended...)
	if len(h.Opens) > api.MaxOpenNonces {
		return fmt.Errorf("snapshot holds %d open nonces, limit %d", len(h.Opens), api.MaxOpenNonces)
	}
	for _, o := range h.Opens {
		s.opens[o.Nonce] = o.Session // a reused nonce: the newer entry wins, as when applied
		s.openOrder = append(s.openOrder, openNonce{nonce: o.Nonce, session: o.Session})
	}
	return s.readKeptDelays(h.KeptDelays)
}

// readSnapSession decodes the i-th session and adds it.
func (s *State) readSnapSession(dec *json.Decoder, i int) error {
	var ss snapSession
	if err := dec.Decode(&ss); err != nil {
		return fmt.Errorf("snapshot session %d: %w", i, err)
	}
	if _, dup := s.sessions[ss.ID]; dup {
		return fmt.Errorf("snapshot session %d appears twice", ss.ID)
	}
	if len(ss.Secret) > api.MaxSecretLen || len(ss.Tenant) > api.MaxTenantName {
		return fmt.Errorf("snapshot session %d: secret or tenant too long", ss.ID)
	}
	sess := &session{id: ss.ID, leaseMS: ss.LeaseMS, ackedBelow: ss.AckedBelow, silentMS: ss.SilentMS, confirmedEpoch: ss.Confirmed, caches: ss.Caches,
		secret: ss.Secret, tenant: ss.Tenant, maxWatches: ss.MaxWatches}
	for _, r := range ss.Results {
		sess.results = append(sess.results, requestResult{id: r.ID, result: recodeResult(s.codec, r.Result)}) // in the cell's codec (codecgate.go)
	}
	if err := s.readCached(sess, ss); err != nil {
		return err
	}
	s.sessions[sess.id] = sess
	s.use(sess.tenant, 1, 0, 0)
	return nil
}

// readSnapNode decodes the i-th node, checks it against the nodes read
// before it, and links it.
func (s *State) readSnapNode(dec *json.Decoder, i int) error {
	sn, parent, err := s.decodeSnapNode(dec, i)
	if err != nil {
		return err
	}
	n, err := nodeFromSnap(sn, parent, parent == s.root)
	if err != nil {
		return err
	}
	return s.linkSnapNode(n, parent)
}

// decodeSnapNode decodes the i-th node: a valid path, not seen before,
// whose parent was read before it. It returns the node and its parent.
func (s *State) decodeSnapNode(dec *json.Decoder, i int) (snapNode, *node, error) {
	var sn snapNode
	if err := dec.Decode(&sn); err != nil {
		return sn, nil, fmt.Errorf("snapshot node %d: %w", i, err)
	}
	// Validate before the path arithmetic below, which assumes a valid path.
	if err := api.ValidatePath(sn.Path); err != nil {
		return sn, nil, fmt.Errorf("snapshot node %d: %w", i, err)
	}
	if _, dup := s.nodes[sn.Path]; dup {
		return sn, nil, fmt.Errorf("snapshot node %s appears twice", sn.Path)
	}
	parent := s.root
	if pp := api.Parent(sn.Path); pp != "/" {
		var ok bool
		if parent, ok = s.nodes[pp]; !ok {
			return sn, nil, fmt.Errorf("snapshot node %s before its parent", sn.Path)
		}
	}
	return sn, parent, nil
}

// nodeFromSnap builds a node from its snapshot image; atRoot says whether
// it is a prefix root (its parent the root).
func nodeFromSnap(sn snapNode, parent *node, atRoot bool) (*node, error) {
	if sn.LockDelayMS < 0 || sn.LockDelayMS > api.MaxLockDelay.Milliseconds() {
		return nil, fmt.Errorf("snapshot node %s has lock-delay %d ms", sn.Path, sn.LockDelayMS)
	}
	if sn.Permits < 0 || sn.Permits > api.MaxPermits {
		return nil, fmt.Errorf("snapshot node %s has %d permits", sn.Path, sn.Permits)
	}
	n := &node{
		path: sn.Path, parent: parent, value: string(sn.Value), version: sn.Version, createIndex: sn.CreateIndex,
		modifyIndex: sn.ModifyIndex, childIndex: sn.ChildIndex, ephemeral: sn.Ephemeral, owner: sn.Owner,
		lock: sn.Lock, seq: sn.Seq, nextSeq: sn.NextSeq, dirEpoch: sn.DirEpoch, tokenEpoch: sn.TokenEpoch,
		prefixState: sn.PrefixState, tenant: sn.Tenant,
		lockDelayMS: int32(sn.LockDelayMS), move: sn.Move.state(),
		permits: uint16(sn.Permits), container: sn.Container,
	}
	n.setRare(nodeRare{movedTo: sn.MovedTo, sealDirIndex: sn.SealDir, delayEnded: sn.DelayEnded,
		tokenIndex: sn.TokenIndex, upgradedAt: sn.UpgradedAt, upgradeKeep: sn.UpgradeKeep})
	if sn.Move != nil && len(sn.Move.Kept) > 0 && !atRoot {
		return nil, fmt.Errorf("snapshot node %s keeps moving lock-delays, but is no prefix root", sn.Path)
	}
	if d := sn.Delay; d != nil {
		if d.MS <= 0 || d.MS > api.MaxMovedLockDelay.Milliseconds() { // a moved delay may be longer (prefixmove.go)
			return nil, fmt.Errorf("snapshot node %s: lock-delay of %d ms", sn.Path, d.MS)
		}
		n.delay = &lockDelay{index: d.Index, ms: d.MS, atMS: d.AtMS, keepSeq: d.KeepSeq}
	}
	return n, nil
}

// linkSnapNode adds a node read from a snapshot: to the nodes, the byte
// and quota counts, its parent's children and lock nodes, and its owner's
// ephemerals.
func (s *State) linkSnapNode(n, parent *node) error {
	s.nodes[n.path] = n
	s.bytes += nodeBytes(n)
	s.use(n.tenant, 0, 1, nodeBytes(n))
	parent.addChild(n) // in path order: appended
	if n.lock != api.LockNone {
		parent.lockKids = append(parent.lockKids, n)
	}
	if n.ephemeral {
		sess, ok := s.sessions[n.owner]
		if !ok {
			return fmt.Errorf("snapshot ephemeral %s owned by unknown session %d", n.path, n.owner)
		}
		sess.addEphemeral(n.path)
	}
	return nil
}

// sortLockKids puts every directory's lock nodes in sequence order.
func (s *State) sortLockKids() {
	for _, n := range s.nodes {
		if len(n.lockKids) > 1 {
			sort.Slice(n.lockKids, func(i, j int) bool { return n.lockKids[i].seq < n.lockKids[j].seq })
		}
	}
}
