package proxy

// Bounds on every field of the client requests the proxy acts on itself
// (KeepAlives, which it keeps in its session table and batches; reads and
// watches it answers from its own session). A request past one is refused
// bad_request and changes nothing here.

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// validSecret: a session secret as the leader draws it (128 random bits,
// lower-case hex: api.SessionSecretLen characters).
func validSecret(s string) bool {
	if len(s) != api.SessionSecretLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkName(what, s string) error {
	if len(s) > api.MaxRequestNameLen {
		return api.Errorf(api.CodeBadRequest, "%s is %d bytes, limit %d", what, len(s), api.MaxRequestNameLen)
	}
	return nil
}

func checkSession(id uint64, secret string) error {
	if id == 0 {
		return api.Errorf(api.CodeNoSession, "the request names no session")
	}
	if !validSecret(secret) && !mutant.On(mutant.BatchSplit) {
		return api.Errorf(api.CodeBadRequest, "a session secret is %d lower-case hex characters", api.SessionSecretLen)
	}
	return nil
}

// checkKeepAlive bounds a client's KeepAlive.
func checkKeepAlive(req api.KeepAliveRequest) error {
	if err := checkName("cell", req.Cell); err != nil {
		return err
	}
	if err := checkName("proxy", req.Proxy); err != nil {
		return err
	}
	if req.WaitMS < 0 {
		return api.Errorf(api.CodeBadRequest, "wait_ms %d is negative", req.WaitMS)
	}
	return checkSession(req.Session, req.Secret)
}

// checkRead bounds a read the proxy may answer from its own session.
func checkRead(req api.ReadRequest) error {
	if err := api.ValidatePath(req.Path); err != nil {
		return err
	}
	switch req.Watch {
	case "", api.WatchData, api.WatchChildren:
	default:
		return api.Errorf(api.CodeBadRequest, "unknown watch kind %q", req.Watch)
	}
	return checkSession(req.Session, req.Secret)
}

// checkWatch bounds a client's watch (re-)arming.
func checkWatch(req api.WatchRequest) error {
	if err := checkName("cell", req.Cell); err != nil {
		return err
	}
	if len(req.Watches) > api.MaxWatchesPerCall {
		return api.Errorf(api.CodeBadRequest, "%d watches in one call, limit %d", len(req.Watches), api.MaxWatchesPerCall)
	}
	for _, w := range req.Watches {
		if err := api.ValidatePath(w.Path); err != nil {
			return err
		}
		if w.Kind != api.WatchData && w.Kind != api.WatchChildren {
			return api.Errorf(api.CodeBadRequest, "unknown watch kind %q", w.Kind)
		}
	}
	return checkSession(req.Session, req.Secret)
}
