package cell

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/server/fsm"
)

// machine adapts fsm.State to dragonboat's IConcurrentStateMachine, so a
// snapshot is written while applies go on. Its own RWMutex gives what
// dragonboat's regular state machine did: Update and RecoverFromSnapshot
// exclusive, Lookup shared — which makes a read plus its watch
// registration atomic with respect to applies. A snapshot holds the lock
// only to freeze the state (under a millisecond at 100 000 nodes) and for
// each batch of nodes it reads while writing; encoding and I/O run outside.
type machine struct {
	cell  *Cell
	mu    sync.RWMutex
	state *fsm.State
}

func (m *machine) Update(ents []sm.Entry) ([]sm.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.cell.noteCodec(m.state) // after the batch: proposals read it (codec.go)
	timed := m.cell.applies.on()
	for i := range ents {
		m.apply(&ents[i], timed)
	}
	return ents, nil
}

// apply is Update's apply of one entry. timed (a traced proposal waits):
// the clock is read around the state machine and afterApply, never inside
// them, and the times kept in the cell's applyClock.
func (m *machine) apply(e *sm.Entry, timed bool) {
	m.cell.checkEntryCodec(m.state, e.Index, e.Cmd)
	var start, applied int64
	if timed {
		start = monoNow()
	}
	a := m.state.ApplyEntry(e.Index, e.Cmd)
	if timed {
		applied = monoNow()
	}
	m.cell.afterApply(m.state, &a)
	if timed {
		m.cell.applies.record(e.Index, start, applied, monoNow())
	}
	e.Result = sm.Result{Value: e.Index, Data: a.Encoded}
}

// lookup is a typed read of the state (queries.go) erased to the
// interface{} dragonboat's Lookup takes: read and readLocal pass one as
// the query, and Lookup runs it under the read lock.
type lookup func(*fsm.State) (interface{}, error)

// erase makes f a lookup.
func erase[R any](f func(*fsm.State) (R, error)) lookup {
	return func(s *fsm.State) (interface{}, error) {
		r, err := f(s)
		return r, err
	}
}

func (m *machine) Lookup(q interface{}) (interface{}, error) {
	f, ok := q.(lookup)
	if !ok {
		return nil, errors.New("cell: unknown query")
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return f(m.state)
}

// frozen is what PrepareSnapshot hands SaveSnapshot.
type frozen struct {
	f     *fsm.Frozen
	took  time.Duration // the freeze: how long applies waited for it
	state *fsm.State    // the state it froze (a restore may replace m.state)
}

func (m *machine) PrepareSnapshot() (interface{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	f := m.state.Freeze()
	return &frozen{f: f, took: time.Since(start), state: m.state}, nil
}

// SaveSnapshot and RecoverFromSnapshot time themselves for the snapshot
// metrics (the state is untouched: the clock is read around it, not in it).
func (m *machine) SaveSnapshot(ctx interface{}, w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	fz := ctx.(*frozen)
	defer func() {
		m.mu.Lock()
		fz.state.Release(fz.f)
		m.mu.Unlock()
	}()
	start := time.Now()
	cw := &countingWriter{w: w, h: sha256.New()}
	hold := func() func() {
		m.mu.RLock()
		return m.mu.RUnlock
	}
	if err := fz.f.Write(cw, hold); err != nil {
		return err
	}
	m.cell.snapshots.saved(fz.f.Index(), cw.n, hex.EncodeToString(cw.h.Sum(nil)), time.Since(start), fz.took)
	return nil
}

func (m *machine) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	start := time.Now()
	h := sha256.New()
	in := &stickyEOF{r: io.TeeReader(r, h)}
	s, err := fsm.ReadSnapshot(in)
	if err != nil {
		return fmt.Errorf("cell %s: %w", m.cell.cfg.Info.Name, err)
	}
	if _, err := io.Copy(io.Discard, in); err != nil { // the digest covers every byte
		return fmt.Errorf("cell %s: %w", m.cell.cfg.Info.Name, err)
	}
	m.mu.Lock()
	m.state = s
	m.cell.noteCodec(s)
	m.mu.Unlock()
	m.cell.snapshots.restored(s.Index(), hex.EncodeToString(h.Sum(nil)), time.Since(start))
	return nil
}

// countingWriter counts and digests what it passes on.
type countingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

func (m *machine) Close() error { return nil }

// stickyEOF keeps returning io.EOF once its reader has. dragonboat's
// snapshot block reader hands back a zero-filled buffer on a Read after it
// returned EOF, which a strict decoder would take for trailing data (every
// snapshot over one 2 MiB block failed to restore).
type stickyEOF struct {
	r   io.Reader
	eof bool
}

func (s *stickyEOF) Read(p []byte) (int, error) {
	if s.eof {
		return 0, io.EOF
	}
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.eof = true
	}
	return n, err
}
