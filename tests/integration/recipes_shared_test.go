package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// rwObserver records what the holders of one shared lock saw: how many
// readers and writers held at once, checked at every grant.
type rwObserver struct {
	t          *testing.T
	mu         sync.Mutex
	readers    int
	writers    int
	maxReaders int
	log        []string
}

func (o *rwObserver) enter(name string, shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if shared {
		if o.writers != 0 {
			o.t.Errorf("reader %s granted while a writer holds", name)
		}
		o.readers++
		o.maxReaders = max(o.maxReaders, o.readers)
	} else {
		if o.writers != 0 || o.readers != 0 {
			o.t.Errorf("writer %s granted beside %d readers and %d writers", name, o.readers, o.writers)
		}
		o.writers++
	}
	o.log = append(o.log, "+"+name)
}

// leave is called before Unlock: the holder has stopped acting.
func (o *rwObserver) leave(name string, shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if shared {
		o.readers--
	} else {
		o.writers--
	}
	o.log = append(o.log, "-"+name)
}

// rwHolder is one process of the shared-lock test: its own client and
// session, one Mutex.
type rwHolder struct {
	name   string
	shared bool
	m      *sdk.Mutex
	done   chan error // Lock's result, once
	token  uint64     // the grant's token, once granted
}

func newRWHolder(ctx context.Context, t *testing.T, c *cluster.Cluster, o *rwObserver, path, name string, shared bool) *rwHolder {
	var opts []sdk.LockOption
	if shared {
		opts = append(opts, sdk.Shared())
	}
	h := &rwHolder{name: name, shared: shared, m: newSDK(t, c, 12*time.Second).NewMutex(path, opts...), done: make(chan error, 1)}
	go func() {
		err := h.m.Lock(ctx)
		if err == nil {
			o.enter(name, shared)
		}
		h.done <- err
	}()
	return h
}

func (h *rwHolder) release(ctx context.Context, t *testing.T, o *rwObserver) {
	t.Helper()
	o.leave(h.name, h.shared)
	must(t, h.m.Unlock(ctx))
}

// granted waits up to d for the holder's Lock to return.
func (h *rwHolder) granted(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case err := <-h.done:
		must(t, err)
		h.token = h.m.Token()
	case <-time.After(d):
		t.Fatalf("%s not granted within %v", h.name, d)
	}
}

// waiting checks that the holder's Lock has not returned (for d).
func (h *rwHolder) waiting(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case err := <-h.done:
		t.Fatalf("%s returned from Lock (err %v) %s", h.name, err, why)
	case <-time.After(d):
	}
}

// TestSharedLockRules, on one real cluster, each process with its own
// session: eight readers hold the lock together; a writer queued behind
// them waits until the last has released, woken once (it watches only the
// nearest lower node); four readers queued behind the waiting writer wait
// for it, then all hold together. Judged by the holders' own observations
// (no writer ever beside anyone, all eight readers at once) and by tokens
// (each later node's token is higher).
func TestSharedLockRules(t *testing.T) {
	t.Parallel()
	const (
		path    = "/demo/shared/lock"
		readers = 8
		late    = 4
	)
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	probe := newSDK(t, c, 12*time.Second)
	o := &rwObserver{t: t}

	// Readers one after another, so line order is known.
	var rs []*rwHolder
	for i := 0; i < readers; i++ {
		r := newRWHolder(ctx, t, c, o, path, fmt.Sprintf("r%d", i), true)
		r.granted(t, 30*time.Second)
		rs = append(rs, r)
	}
	if o.maxReaders != readers {
		t.Fatalf("%d readers held together, want %d", o.maxReaders, readers)
	}
	w := newRWHolder(ctx, t, c, o, path, "w", false)
	waitChildren(t, probe, path, readers+1)
	var ls []*rwHolder
	for i := 0; i < late; i++ {
		ls = append(ls, newRWHolder(ctx, t, c, o, path, fmt.Sprintf("late%d", i), true))
		waitChildren(t, probe, path, readers+2+i)
	}
	w.waiting(t, 300*time.Millisecond, "while eight readers hold")
	for _, l := range ls {
		l.waiting(t, 0, "queued behind a waiting writer")
	}

	// Release the readers oldest first: the writer waits for the newest,
	// so only its release wakes it.
	for i, r := range rs {
		if w.m.Wakeups() != 0 {
			t.Fatalf("writer woken %d times with %d readers still holding", w.m.Wakeups(), readers-i)
		}
		r.release(ctx, t, o)
		if i < readers-1 {
			w.waiting(t, 150*time.Millisecond, fmt.Sprintf("with %d readers still holding", readers-1-i))
		}
	}
	w.granted(t, 30*time.Second)
	if got := w.m.Wakeups(); got != 1 {
		t.Errorf("writer woken %d times, want 1 (by the reader just below it)", got)
	}
	for i, r := range rs {
		if i > 0 && r.token <= rs[i-1].token {
			t.Errorf("reader %s token %d not above %s's %d", r.name, r.token, rs[i-1].name, rs[i-1].token)
		}
		if w.token <= r.token {
			t.Errorf("writer token %d not above reader %s's %d", w.token, r.name, r.token)
		}
	}
	for _, l := range ls {
		l.waiting(t, 150*time.Millisecond, "while the writer holds")
	}
	wToken := w.token
	w.release(ctx, t, o)
	for _, l := range ls {
		l.granted(t, 30*time.Second)
		if l.token <= wToken {
			t.Errorf("late reader %s token %d not above the writer's %d", l.name, l.token, wToken)
		}
		// Each late reader waited on the writer alone: one wake-up.
		if got := l.m.Wakeups(); got != 1 {
			t.Errorf("late reader %s woken %d times, want 1", l.name, got)
		}
	}
	o.mu.Lock()
	together := o.readers
	o.mu.Unlock()
	if together != late {
		t.Errorf("%d late readers hold together, want %d", together, late)
	}
	for _, l := range ls {
		l.release(ctx, t, o)
	}
	// The lock directory was a container (the SDK made it): it goes
	// with its last node.
	if names, _, err := probe.Children(ctx, path); !errors.Is(err, sdk.ErrNoNode) {
		t.Errorf("left behind: %v %v, want the lock directory gone", names, err)
	}
	t.Logf("order of grants (+) and releases (-): %v", o.log)
}
