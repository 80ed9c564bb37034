package fence

import (
	"errors"
	"net/http"
	"strconv"
)

// Header carries a fencing token on a request to a protected service.
const Header = "Fencing-Token"

// SetToken puts token on an outgoing request.
func SetToken(r *http.Request, token uint64) {
	r.Header.Set(Header, strconv.FormatUint(token, 10))
}

// TokenFrom reads the token of an incoming request.
func TokenFrom(r *http.Request) (uint64, error) {
	v := r.Header.Get(Header)
	if v == "" {
		return 0, errors.New("fence: no " + Header + " header")
	}
	return strconv.ParseUint(v, 10, 64)
}

// Middleware admits a request only if its token is at least the highest
// accepted for its lock (lockOf names the lock a request writes under; nil
// means one lock for the whole service, named by the request path). A
// missing or malformed token gets 400, a stale one 409 Conflict. The check
// and the handler run under the fence's lock, so two writers cannot
// interleave a stale write after a newer one was admitted.
func Middleware(f *Fence, lockOf func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := TokenFrom(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		lock := r.URL.Path
		if lockOf != nil {
			lock = lockOf(r)
		}
		err = f.Do(lock, token, func() error {
			next.ServeHTTP(w, r)
			return nil
		})
		if errors.Is(err, ErrStaleToken) {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
}
