package fence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// holders is a Checker standing in for the lock service in this unit test
// (tests/integration checks CheckToken against a real cell): the current
// holder's token per lock.
type holders struct {
	mu  sync.Mutex
	now map[string]uint64
}

func (h *holders) TokenValid(_ context.Context, lock string, token uint64) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now[lock] == token && token != 0, nil
}

func (h *holders) grant(lock string, token uint64) {
	h.mu.Lock()
	h.now[lock] = token
	h.mu.Unlock()
}

// printer is a resource that can only check: it keeps no mark, so it asks
// the service before each job.
type printer struct {
	svc  Checker
	jobs []string
}

func (p *printer) print(ctx context.Context, token uint64, job string) error {
	return CheckThen(ctx, p.svc, "/demo/printer", token, func() error {
		p.jobs = append(p.jobs, job)
		return nil
	})
}

func TestCheckThen(t *testing.T) {
	ctx := context.Background()
	svc := &holders{now: map[string]uint64{}}
	p := &printer{svc: svc}
	svc.grant("/demo/printer", 10)
	if err := p.print(ctx, 10, "a1"); err != nil {
		t.Fatal(err)
	}
	svc.grant("/demo/printer", 20) // a takeover
	if err := p.print(ctx, 10, "a2"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("old holder: %v, want ErrNotHolder", err)
	}
	if err := p.print(ctx, 20, "b1"); err != nil {
		t.Fatal(err)
	}
	svc.grant("/demo/printer", 0) // released: nobody holds
	if err := p.print(ctx, 20, "b2"); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("after release: %v, want ErrNotHolder", err)
	}
	if fmt.Sprint(p.jobs) != "[a1 b1]" {
		t.Fatalf("printed %v, want [a1 b1]", p.jobs)
	}
	failing := CheckThen(ctx, checkerFunc(func() error { return errors.New("unreachable") }), "/x", 1, func() error {
		t.Fatal("wrote without an answer")
		return nil
	})
	if failing == nil || errors.Is(failing, ErrNotHolder) {
		t.Fatalf("check error: %v", failing)
	}
}

type checkerFunc func() error

func (f checkerFunc) TokenValid(context.Context, string, uint64) (bool, error) { return false, f() }

// etagStore is an object store with ETags (S3 If-Match style), in memory.
type etagStore struct {
	mu   sync.Mutex
	objs map[string]object
	gen  int
}

type object struct {
	value []byte
	etag  string
	token uint64
}

func (s *etagStore) Read(_ context.Context, key string) ([]byte, string, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[key]
	return append([]byte(nil), o.value...), o.etag, o.token, nil
}

func (s *etagStore) WriteIf(_ context.Context, key string, value []byte, token uint64, etag string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objs[key].etag != etag {
		return ErrVersionChanged
	}
	s.gen++
	s.objs[key] = object{value: append([]byte(nil), value...), etag: fmt.Sprintf(`"%d"`, s.gen), token: token}
	return nil
}

func TestConditionalWrite(t *testing.T) {
	ctx := context.Background()
	st := &etagStore{objs: map[string]object{}}
	appendTo := func(s string) func([]byte) ([]byte, error) {
		return func(old []byte) ([]byte, error) { return append(old, s...), nil }
	}
	if err := ConditionalWrite(ctx, st, "k", 10, appendTo("a")); err != nil {
		t.Fatal(err)
	}
	// Holder 10 reads, is paused; holder 20 takes over and writes first.
	var paused error
	err := ConditionalWrite(ctx, st, "k", 10, func(old []byte) ([]byte, error) {
		paused = ConditionalWrite(ctx, st, "k", 20, appendTo("b")) // the new holder's first act
		return append(old, 'x'), nil
	})
	if paused != nil {
		t.Fatal(paused)
	}
	if !errors.Is(err, ErrVersionChanged) {
		t.Fatalf("write after the object changed: %v, want ErrVersionChanged", err)
	}
	// Resumed, the old holder reads again and finds the newer token.
	var stale *StaleError
	if err := ConditionalWrite(ctx, st, "k", 10, appendTo("x")); !errors.As(err, &stale) || stale.Highest != 20 || !errors.Is(err, ErrStaleToken) {
		t.Fatalf("old holder's fresh write: %v, want a stale token below 20", err)
	}
	if err := ConditionalWrite(ctx, st, "k", 20, appendTo("c")); err != nil {
		t.Fatal(err)
	}
	if v, _, tok, _ := st.Read(ctx, "k"); string(v) != "abc" || tok != 20 {
		t.Fatalf("object %q token %d, want abc with 20", v, tok)
	}
	// A missing object is created only if still missing.
	if err := ConditionalWrite(ctx, st, "new", 30, appendTo("n")); err != nil {
		t.Fatal(err)
	}
}
