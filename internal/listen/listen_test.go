package listen

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// fakeListener answers Accept from a script of errors, then a connection.
type fakeListener struct {
	net.Listener
	errs []error
}

func (f *fakeListener) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	a, _ := net.Pipe()
	return a, nil
}

// TestAcceptSurvivesExhaustion: running out of descriptors pauses and
// retries (growing pauses, capped); any other error ends Accept.
func TestAcceptSurvivesExhaustion(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	enfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}
	closed := net.ErrClosed
	for _, tc := range []struct {
		name    string
		errs    []error
		pauses  int
		wantErr error
	}{
		{"no error", nil, 0, nil},
		{"EMFILE then a connection", []error{emfile, emfile, enfile}, 3, nil},
		{"closed", []error{closed}, 0, closed},
		{"EMFILE then closed", []error{emfile, closed}, 1, closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var slept []time.Duration
			l := &Listener{Listener: &fakeListener{errs: tc.errs}, sleep: func(d time.Duration) { slept = append(slept, d) }}
			c, err := l.Accept()
			if !errors.Is(err, tc.wantErr) || (err == nil) != (c != nil) {
				t.Fatalf("Accept = %v, %v; want error %v", c, err, tc.wantErr)
			}
			if len(slept) != tc.pauses || int(l.Exhausted.Load()) != tc.pauses {
				t.Fatalf("paused %v (%d exhausted), want %d pauses", slept, l.Exhausted.Load(), tc.pauses)
			}
			for i := 1; i < len(slept); i++ {
				if slept[i] < slept[i-1] || slept[i] > maxPause {
					t.Fatalf("pauses %v do not grow within %v", slept, maxPause)
				}
			}
		})
	}
}
