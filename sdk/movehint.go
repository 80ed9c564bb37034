package sdk

import (
	"fmt"
)

// moveStepError is a migration step that failed once the migration was
// in the directory: its message says how to go on, since the prefix may
// stay sealed (refusing writes) until the move is resumed or undone.
type moveStepError struct {
	err       error
	prefix    string
	to        string
	committed bool // the directory committed the move: only resuming is left
}

func (e *moveStepError) Error() string {
	if e.committed {
		return fmt.Sprintf("%v (the move of %s to %s is committed; finish it: run `lockctl migrate %s --to %s` again, or MovePrefix)",
			e.err, e.prefix, e.to, e.prefix, e.to)
	}
	return fmt.Sprintf("%v (the migration of %s to %s is still in flight and %s may refuse writes until it goes on or is undone: resume with `lockctl migrate %s --to %s` (MovePrefix), or abort with `lockctl migrate %s --abort` (AbortMove))",
		e.err, e.prefix, e.to, e.prefix, e.prefix, e.to, e.prefix)
}

func (e *moveStepError) Unwrap() error { return e.err }

// moveFailed wraps the error of a step of the migration of prefix to to;
// nil stays nil.
func moveFailed(err error, prefix, to string, committed bool) error {
	if err == nil {
		return nil
	}
	return &moveStepError{err: err, prefix: prefix, to: to, committed: committed}
}
