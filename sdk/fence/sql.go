package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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
	// (MySQL, SQLite). Dialect Postgres implies it.
	Dollar bool
	// Dialect is the database. Empty means Postgres with Dollar, else MySQL;
	// SQLite users must set it (SQLite has no SELECT … FOR UPDATE).
	Dialect  Dialect
	Rejected *prometheus.CounterVec // optional, see NewRejectionCounter
}

// Dialect names the database where the SQL differs.
type Dialect string

const (
	MySQL    Dialect = "mysql"
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// Querier is the optional read side of an Execer; *sql.Tx, *sql.DB and
// *sql.Conn have it. Advance needs it to tell an unchanged row from a stale
// token (below).
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
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

func (s SQL) dialect() Dialect {
	switch {
	case s.Dialect != "":
		return s.Dialect
	case s.Dollar:
		return Postgres
	}
	return MySQL
}

func (s SQL) ph(i int) string {
	if s.Dollar || s.Dialect == Postgres {
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
//
// MySQL counts only rows an UPDATE changed, so the same holder's second
// write with the same token affects 0 rows. When no row was affected and tx
// is a Querier, Advance therefore reads the stored fence (a locking read,
// SELECT … FOR UPDATE, except on SQLite whose write transaction already
// excludes other writers): equal to token is success, higher is stale. A tx
// that is only an Execer gets the old rule, 0 rows is stale.
func (s SQL) Advance(ctx context.Context, tx Execer, lock string, token uint64) error {
	t, err := s.table()
	if err != nil {
		return err
	}
	if token > math.MaxInt64 {
		// BIGINT is signed: such a token would compare below every other.
		// lockd never issues one (its directory epochs stay below 2^23).
		return fmt.Errorf("fence: token %d for %s does not fit a BIGINT", token, lock)
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
	if n > 0 {
		return nil
	}
	var highest uint64
	if qr, ok := tx.(Querier); ok {
		sel := fmt.Sprintf("SELECT fence FROM %s WHERE lock_name = %s", t, s.ph(1))
		if s.dialect() != SQLite {
			sel += " FOR UPDATE"
		}
		var cur int64
		switch err := qr.QueryRowContext(ctx, sel, lock).Scan(&cur); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("fence: no fence row for %s (call Ensure first)", lock)
		case err != nil:
			return err
		case cur == int64(token):
			return nil // matched, unchanged (MySQL)
		case cur < int64(token):
			return fmt.Errorf("fence: fence of %s is %d, below token %d, yet the update matched nothing", lock, cur, token)
		}
		highest = uint64(cur)
	}
	if s.Rejected != nil {
		s.Rejected.WithLabelValues(lock).Inc()
	}
	return &StaleError{Lock: lock, Token: token, Highest: highest}
}
