package fence

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

// Execer is what SQL needs from a transaction; *sql.Tx and *sql.DB have it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// SQL keeps the fence in a table of the protected database:
//
//	CREATE TABLE lock_fences (lock_name TEXT PRIMARY KEY, fence BIGINT NOT NULL)
//
// and checks it inside the caller's transaction, so the check and the
// protected write commit together or not at all.
type SQL struct {
	// Table is the fence table's name (default lock_fences).
	Table string
	// Dollar selects $1-style placeholders (PostgreSQL); false gives ?
	// (MySQL, SQLite).
	Dollar   bool
	Rejected *prometheus.CounterVec // optional, see NewRejectionCounter
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

func (s SQL) table() (string, error) {
	t := s.Table
	if t == "" {
		t = "lock_fences"
	}
	if !identifier.MatchString(t) {
		return "", fmt.Errorf("fence: bad table name %q", t)
	}
	return t, nil
}

func (s SQL) ph(i int) string {
	if s.Dollar {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// Ensure creates the lock's row with fence 0 if it is missing (portable:
// no upsert syntax). Call it once per lock, outside or inside a transaction.
func (s SQL) Ensure(ctx context.Context, tx Execer, lock string) error {
	t, err := s.table()
	if err != nil {
		return err
	}
	q := fmt.Sprintf("INSERT INTO %s (lock_name, fence) SELECT %s, 0 WHERE NOT EXISTS (SELECT 1 FROM %s WHERE lock_name = %s)",
		t, s.ph(1), t, s.ph(2))
	_, err = tx.ExecContext(ctx, q, lock, lock)
	return err
}

// Advance raises the lock's fence to token inside tx, or fails with
// ErrStaleToken if a higher token was already accepted: the conditional
//
//	UPDATE lock_fences SET fence = $1 WHERE lock_name = $2 AND fence <= $1
//
// The caller does its protected write in the same transaction and commits
// only if Advance returned nil. The row must exist (Ensure).
func (s SQL) Advance(ctx context.Context, tx Execer, lock string, token uint64) error {
	t, err := s.table()
	if err != nil {
		return err
	}
	q := fmt.Sprintf("UPDATE %s SET fence = %s WHERE lock_name = %s AND fence <= %s", t, s.ph(1), s.ph(2), s.ph(3))
	res, err := tx.ExecContext(ctx, q, int64(token), lock, int64(token))
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		if s.Rejected != nil {
			s.Rejected.WithLabelValues(lock).Inc()
		}
		return &StaleError{Lock: lock, Token: token}
	}
	return nil
}
