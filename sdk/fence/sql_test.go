package fence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeDB is a one-table database behind database/sql that interprets the
// statements SQL issues. changedRows selects MySQL's rows-affected rule (an
// UPDATE that leaves a row as it was does not count it) over the matched-
// rows rule of PostgreSQL and SQLite.
type fakeDB struct {
	mu          sync.Mutex
	changedRows bool
	rows        map[string]int64
	queries     []string
}

var (
	fakeDBsMu sync.Mutex
	fakeDBs   = map[string]*fakeDB{}
)

func init() { sql.Register("fencefake", fakeDriver{}) }

type fakeDriver struct{}

func (fakeDriver) Open(name string) (driver.Conn, error) {
	fakeDBsMu.Lock()
	defer fakeDBsMu.Unlock()
	db, ok := fakeDBs[name]
	if !ok {
		return nil, fmt.Errorf("no fake database %q", name)
	}
	return &fakeConn{db: db}, nil
}

type fakeConn struct{ db *fakeDB }

func (c *fakeConn) Prepare(q string) (driver.Stmt, error) { return &fakeStmt{db: c.db, q: q}, nil }
func (c *fakeConn) Close() error                          { return nil }
func (c *fakeConn) Begin() (driver.Tx, error)             { return fakeTxn{}, nil }

type fakeTxn struct{}

func (fakeTxn) Commit() error   { return nil }
func (fakeTxn) Rollback() error { return nil }

type fakeStmt struct {
	db *fakeDB
	q  string
}

func (s *fakeStmt) Close() error  { return nil }
func (s *fakeStmt) NumInput() int { return -1 }

var dollar = regexp.MustCompile(`\$[0-9]+`)

func (s *fakeStmt) Exec(args []driver.Value) (driver.Result, error) {
	db := s.db
	db.mu.Lock()
	defer db.mu.Unlock()
	q := dollar.ReplaceAllString(s.q, "?")
	db.queries = append(db.queries, q)
	switch {
	case q == "INSERT INTO lock_fences (lock_name, fence) SELECT ?, 0 WHERE NOT EXISTS (SELECT 1 FROM lock_fences WHERE lock_name = ?)":
		if _, ok := db.rows[args[0].(string)]; !ok {
			db.rows[args[0].(string)] = 0
			return driver.RowsAffected(1), nil
		}
		return driver.RowsAffected(0), nil
	case q == "UPDATE lock_fences SET fence = ? WHERE lock_name = ? AND fence <= ?":
		tok, lock, bound := args[0].(int64), args[1].(string), args[2].(int64)
		cur, ok := db.rows[lock]
		if !ok || cur > bound {
			return driver.RowsAffected(0), nil
		}
		db.rows[lock] = tok
		if db.changedRows && cur == tok {
			return driver.RowsAffected(0), nil
		}
		return driver.RowsAffected(1), nil
	}
	return nil, errors.New("fake db: unexpected exec: " + q)
}

func (s *fakeStmt) Query(args []driver.Value) (driver.Rows, error) {
	db := s.db
	db.mu.Lock()
	defer db.mu.Unlock()
	q := dollar.ReplaceAllString(s.q, "?")
	db.queries = append(db.queries, q)
	q = strings.TrimSuffix(q, " FOR UPDATE")
	if q != "SELECT fence FROM lock_fences WHERE lock_name = ?" {
		return nil, errors.New("fake db: unexpected query: " + s.q)
	}
	cur, ok := db.rows[args[0].(string)]
	if !ok {
		return &fakeRows{}, nil
	}
	return &fakeRows{vals: []int64{cur}}, nil
}

type fakeRows struct{ vals []int64 }

func (r *fakeRows) Columns() []string { return []string{"fence"} }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.vals) == 0 {
		return io.EOF
	}
	dest[0], r.vals = r.vals[0], r.vals[1:]
	return nil
}

func openFakeDB(t *testing.T, changedRows bool) (*sql.DB, *fakeDB) {
	t.Helper()
	name := t.Name()
	fdb := &fakeDB{changedRows: changedRows, rows: map[string]int64{}}
	fakeDBsMu.Lock()
	fakeDBs[name] = fdb
	fakeDBsMu.Unlock()
	db, err := sql.Open("fencefake", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, fdb
}

// A holder writes twice with the same token. MySQL reports 0 rows affected
// for the second conditional UPDATE because the row did not change; that is
// not a stale token. A lower token still is, on every database.
func TestSQLAdvanceSameTokenTwice(t *testing.T) {
	cases := []struct {
		name        string
		s           SQL
		changedRows bool
		lockingRead bool // the follow-up read must lock the row (FOR UPDATE)
	}{
		{"mysql", SQL{Dialect: MySQL}, true, true},
		{"mysql by default", SQL{}, true, true},
		{"postgres", SQL{Dollar: true}, false, true},
		{"sqlite", SQL{Dialect: SQLite}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, fdb := openFakeDB(t, tc.changedRows)
			rejected := NewRejectionCounter()
			s := tc.s
			s.Rejected = rejected
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := s.Ensure(ctx, tx, "shard-7"); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := s.Advance(ctx, tx, "shard-7", 42); err != nil {
					t.Fatalf("write %d with the holder's token: %v", i+1, err)
				}
			}
			err = s.Advance(ctx, tx, "shard-7", 41)
			var se *StaleError
			if !errors.As(err, &se) || se.Highest != 42 {
				t.Fatalf("lower token: %v, want stale below 42", err)
			}
			if err := s.Advance(ctx, tx, "shard-7", 43); err != nil {
				t.Fatal(err)
			}
			if fdb.rows["shard-7"] != 43 || testutil.ToFloat64(rejected.WithLabelValues("shard-7")) != 1 {
				t.Fatalf("rows %v, rejections %v", fdb.rows, testutil.ToFloat64(rejected.WithLabelValues("shard-7")))
			}
			for _, q := range fdb.queries {
				if strings.HasPrefix(q, "SELECT") && strings.HasSuffix(q, " FOR UPDATE") != tc.lockingRead {
					t.Fatalf("follow-up read %q: locking=%v, want %v", q, !tc.lockingRead, tc.lockingRead)
				}
			}
		})
	}
}

func TestSQLAdvanceRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	db, fdb := openFakeDB(t, true)
	s := SQL{}
	if err := s.Advance(ctx, db, "missing", 5); err == nil || errors.Is(err, ErrStaleToken) {
		t.Fatalf("advance without a row: %v, want an error that is not stale", err)
	}
	if err := s.Ensure(ctx, db, "a"); err != nil {
		t.Fatal(err)
	}
	// A token that would be negative as BIGINT is refused before any write.
	if err := s.Advance(ctx, db, "a", math.MaxInt64+1); err == nil || errors.Is(err, ErrStaleToken) {
		t.Fatalf("token over MaxInt64: %v, want a range error", err)
	}
	if fdb.rows["a"] != 0 {
		t.Fatalf("refused token wrote %d", fdb.rows["a"])
	}
}
