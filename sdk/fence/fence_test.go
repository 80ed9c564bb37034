package fence

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAccept(t *testing.T) {
	rejected := NewRejectionCounter()
	f := New(rejected)
	steps := []struct {
		lock  string
		token uint64
		stale bool
	}{
		{"a", 10, false},
		{"a", 10, false}, // the same holder writes again
		{"a", 9, true},   // a paused former holder
		{"b", 1, false},  // marks are per lock
		{"a", 11, false}, // the next holder
		{"a", 10, true},
	}
	for i, s := range steps {
		err := f.Accept(s.lock, s.token)
		if got := errors.Is(err, ErrStaleToken); got != s.stale {
			t.Fatalf("step %d: Accept(%s, %d) = %v, want stale=%v", i, s.lock, s.token, err, s.stale)
		}
	}
	if h := f.Highest("a"); h != 11 {
		t.Fatalf("highest %d, want 11", h)
	}
	if n := testutil.ToFloat64(rejected.WithLabelValues("a")); n != 2 {
		t.Fatalf("%v rejections counted, want 2", n)
	}
}

func TestDoRaisesOnlyOnSuccessfulWrite(t *testing.T) {
	f := New(nil)
	boom := errors.New("disk full")
	if err := f.Do("a", 5, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if f.Highest("a") != 0 {
		t.Fatal("failed write raised the mark")
	}
}

// Concurrent writers: whatever the interleaving, the sequence of admitted
// tokens never goes down.
func TestDoIsMonotonicUnderConcurrency(t *testing.T) {
	f := New(nil)
	var (
		mu       sync.Mutex
		admitted []uint64
		wg       sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				tok := uint64(i*8 + w)
				_ = f.Do("l", tok, func() error {
					mu.Lock()
					admitted = append(admitted, tok)
					mu.Unlock()
					return nil
				})
			}
		}(w)
	}
	wg.Wait()
	for i := 1; i < len(admitted); i++ {
		if admitted[i] < admitted[i-1] {
			t.Fatalf("admitted %d after %d", admitted[i], admitted[i-1])
		}
	}
}

// fakeTx stands in for a database transaction in this unit test: it keeps
// one fence row per lock and interprets the two statements SQL issues.
type fakeTx struct{ rows map[string]int64 }

type rowsAffected int64

func (r rowsAffected) LastInsertId() (int64, error) { return 0, nil }
func (r rowsAffected) RowsAffected() (int64, error) { return int64(r), nil }

func (f *fakeTx) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	switch {
	case strings.HasPrefix(q, "INSERT INTO lock_fences (lock_name, fence) SELECT $1, 0 WHERE NOT EXISTS"):
		if _, ok := f.rows[args[0].(string)]; !ok {
			f.rows[args[0].(string)] = 0
			return rowsAffected(1), nil
		}
		return rowsAffected(0), nil
	case q == "UPDATE lock_fences SET fence = $1 WHERE lock_name = $2 AND fence <= $3":
		tok, lock := args[0].(int64), args[1].(string)
		if cur, ok := f.rows[lock]; ok && cur <= tok {
			f.rows[lock] = tok
			return rowsAffected(1), nil
		}
		return rowsAffected(0), nil
	}
	return nil, errors.New("unexpected query: " + q)
}

func TestSQLAdvance(t *testing.T) {
	ctx := context.Background()
	tx := &fakeTx{rows: map[string]int64{}}
	rejected := NewRejectionCounter()
	s := SQL{Dollar: true, Rejected: rejected}
	if err := s.Ensure(ctx, tx, "shard-7"); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(ctx, tx, "shard-7", 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(ctx, tx, "shard-7", 41); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("stale token: %v", err)
	}
	if err := s.Advance(ctx, tx, "shard-7", 43); err != nil {
		t.Fatal(err)
	}
	if tx.rows["shard-7"] != 43 || testutil.ToFloat64(rejected.WithLabelValues("shard-7")) != 1 {
		t.Fatalf("rows %v", tx.rows)
	}
	if err := (SQL{Table: "x; DROP TABLE y"}).Advance(ctx, tx, "a", 1); err == nil {
		t.Fatal("bad table name accepted")
	}
}

func TestMiddleware(t *testing.T) {
	f := New(nil)
	writes := 0
	h := Middleware(f, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writes++ }))
	cases := []struct {
		token string
		want  int
	}{
		{"", http.StatusBadRequest},
		{"x", http.StatusBadRequest},
		{"100", http.StatusOK},
		{"99", http.StatusConflict},
		{"101", http.StatusOK},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodPost, "/shard/7", nil)
		if c.token != "" {
			req.Header.Set(Header, c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Fatalf("token %q: status %d, want %d", c.token, rec.Code, c.want)
		}
	}
	if writes != 2 {
		t.Fatalf("%d writes reached the handler, want 2", writes)
	}
}
