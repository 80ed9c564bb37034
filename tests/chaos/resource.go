package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// Resource is the protected resource of the fenced-write workload: it
// admits a write only through an sdk/fence Fence (the highest accepted
// token per lock, refusing lower ones, check and write atomic) and records
// every attempt, accepted or refused, with its token and the writer's
// session, in decision order. The fencing checker replays the attempts
// itself rather than trusting the fence. In-process workers call Write and
// Read with their lock's Context; the holder process writes over HTTP
// (Handler).
type Resource struct {
	h     *check.History
	fence *fence.Fence

	seq      atomic.Uint64
	mu       sync.Mutex
	rejected map[string]int // per lock
}

// NewResource returns a resource recording into h.
func NewResource(h *check.History) *Resource {
	return &Resource{h: h, fence: fence.New(nil), rejected: map[string]int{}}
}

// Write applies a write under lock with token from session (writer names
// the client, for the report). It returns fence.ErrStaleToken (a
// *fence.StaleError) if the token is below the lock's mark. live is the
// writer's lock Context, if the writer is a client of this process (nil
// otherwise): whether it is still live just after the verdict is recorded.
func (r *Resource) Write(lock string, token, session uint64, writer string, live context.Context) error {
	return r.access(lock, token, session, writer, false, live)
}

// Read is a shared holder's access: admitted if token is at least the
// lock's mark, which it does not raise (readers holding at once have
// different tokens, and none may refuse another).
func (r *Resource) Read(lock string, token, session uint64, writer string, live context.Context) error {
	return r.access(lock, token, session, writer, true, live)
}

func (r *Resource) access(lock string, token, session uint64, writer string, read bool, live context.Context) error {
	// One mutex orders every access, so the recorded sequence is the order
	// in which the checks were made.
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if read {
		if hi := r.fence.Highest(lock); token < hi {
			err = &fence.StaleError{Lock: lock, Token: token, Highest: hi}
		}
	} else {
		err = r.fence.Do(lock, token, func() error { return nil })
	}
	w := check.Write{Seq: r.seq.Add(1), Lock: lock, Token: token, Session: session, Writer: writer, Read: read, Accepted: err == nil, At: r.h.Now()}
	if live != nil {
		w.LiveKnown, w.LiveAfter = true, live.Err() == nil
	}
	r.h.AddWrite(w)
	if errors.Is(err, fence.ErrStaleToken) {
		r.rejected[lock]++
		r.h.AddStaleWrite()
	}
	return err
}

// Rejected is the number of stale writes refused, per lock.
func (r *Resource) Rejected() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.rejected))
	for k, v := range r.rejected {
		out[k] = v
	}
	return out
}

// HTTP protocol of the resource: POST /write?lock=L with the token in
// fence.Header and the writer's session and name in these headers. 204 on
// success, 409 for a stale token, 400 for a malformed request.
const (
	HeaderSession = "Chaos-Session"
	HeaderWriter  = "Chaos-Writer"
)

// Handler serves the HTTP protocol.
func (r *Resource) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, req *http.Request) {
		token, err := fence.TokenFrom(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		session, err := strconv.ParseUint(req.Header.Get(HeaderSession), 10, 64)
		lock := req.URL.Query().Get("lock")
		if err != nil || lock == "" {
			http.Error(w, "need lock and "+HeaderSession, http.StatusBadRequest)
			return
		}
		err = r.Write(lock, token, session, req.Header.Get(HeaderWriter), nil)
		switch {
		case errors.Is(err, fence.ErrStaleToken):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}

// Serve serves the resource on 127.0.0.1 (a free port) until the returned
// stop is called; url is its base URL.
func (r *Resource) Serve() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("resource: %w", err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// HolderLine is one line the holder process (cmd/holder) prints.
type HolderLine struct {
	Ev          string `json:"ev"` // granted, write, lost, exit, error, lease
	Node        string `json:"node,omitempty"`
	Token       uint64 `json:"token,omitempty"`
	Session     uint64 `json:"session,omitempty"`
	Owner       uint64 `json:"owner,omitempty"`
	CreateIndex uint64 `json:"create_index,omitempty"`
	Epoch       uint64 `json:"epoch,omitempty"`
	Index       uint64 `json:"index,omitempty"`
	Held        bool   `json:"held,omitempty"`
	Status      int    `json:"status,omitempty"`
	PID         int    `json:"pid,omitempty"`
	Err         string `json:"err,omitempty"`
	// Until (lease lines): the holder's local lease end, Unix nanoseconds
	// (one machine, one wall clock), and At when it said so.
	Until int64 `json:"until,omitempty"`
	At    int64 `json:"at,omitempty"`
}
