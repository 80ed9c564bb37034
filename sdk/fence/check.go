package fence

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotHolder is returned when the lock service says a token does not
// hold its lock (any more).
var ErrNotHolder = errors.New("fence: the token does not hold its lock")

// Checker asks the lock service whether token holds lock right now; an
// *sdk.Client is one (Client.TokenValid: a linearizable read on the
// cell's leader, Chubby's CheckSequencer).
type Checker interface {
	TokenValid(ctx context.Context, lock string, token uint64) (bool, error)
}

// CheckThen runs write only if the lock service says token holds lock, for
// resources that cannot store a high-water mark of their own (a legacy
// service, a device, a file system without conditional writes).
//
// It has a window: the holder can lose the lock just after the check, and
// write then runs for a holder that no longer holds. Keep write short, and
// prefer a resource that stores the highest token it has seen (Fence, SQL,
// ConditionalWrite) whenever it can: that check has no window.
func CheckThen(ctx context.Context, c Checker, lock string, token uint64, write func() error) error {
	ok, err := c.TokenValid(ctx, lock, token)
	if err != nil {
		return fmt.Errorf("fence: check token %d of %s: %w", token, lock, err)
	}
	if !ok {
		return fmt.Errorf("%w: token %d of %s", ErrNotHolder, token, lock)
	}
	if write == nil {
		return nil
	}
	return write()
}

// ErrVersionChanged is a VersionedStore's answer to a conditional write
// whose object changed since it was read.
var ErrVersionChanged = errors.New("fence: the object changed since it was read")

// VersionedStore is a store with conditional writes: an object store's
// ETag (S3 If-Match, GCS generation), a key-value store's revision, a
// document's version. The fencing token is recorded with each object.
type VersionedStore interface {
	// Read returns key's value, its version ("" if it does not exist),
	// and the fencing token recorded with it (0 if none).
	Read(ctx context.Context, key string) (value []byte, version string, token uint64, err error)
	// WriteIf stores value with token recorded beside it only if key's
	// version is still version ("": only if it does not exist), and
	// returns ErrVersionChanged otherwise (writing nothing).
	WriteIf(ctx context.Context, key string, value []byte, token uint64, version string) error
}

// ConditionalWrite is a fenced read-modify-write on a store with
// versions: it reads key, refuses if a higher token than token wrote it
// (a newer holder has acted), computes the new value with update, and
// writes it, recording token, only if the object is still the version
// read. A holder paused past its lease therefore cannot overwrite what a
// newer holder wrote, nor anything written between its read and its
// write. A new holder's first act should be a ConditionalWrite (update
// may return the value unchanged): it records the new token, and from
// then on every write of an older holder is refused.
//
// ErrVersionChanged means another writer got in between: read again and
// decide again, which is what calling ConditionalWrite again does.
func ConditionalWrite(ctx context.Context, s VersionedStore, key string, token uint64, update func(old []byte) ([]byte, error)) error {
	old, version, recorded, err := s.Read(ctx, key)
	if err != nil {
		return err
	}
	if token < recorded {
		return &StaleError{Lock: key, Token: token, Highest: recorded}
	}
	value, err := update(old)
	if err != nil {
		return err
	}
	return s.WriteIf(ctx, key, value, token, version)
}
