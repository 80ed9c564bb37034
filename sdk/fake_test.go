package sdk

// The sdk unit tests' view of the shared fake cell (tests/fake): thin
// adapters to this package's types (watchKey) and lower-case helpers.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

type fakeReq struct {
	replica int
	route   string
	body    []byte
	auth    string
}

// hookFunc intercepts a request; next runs the fake's own handling.
type hookFunc = fake.Hook

type fakeCell struct {
	*fake.Cell
	name string
}

func newFakeCell(t testing.TB, replicas int) *fakeCell {
	t.Helper()
	c, err := fake.New(fake.Options{Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeCell{Cell: c, name: c.Name()}
}

func (fc *fakeCell) addr(i int) string      { return fc.Addr(i) }
func (fc *fakeCell) close()                 { fc.Close() }
func (fc *fakeCell) setHook(h hookFunc)     { fc.SetHook(h) }
func (fc *fakeCell) failover(newLeader int) { fc.Failover(newLeader) }
func (fc *fakeCell) expire(id uint64)       { fc.Expire(id) }
func (fc *fakeCell) armed(id uint64, k watchKey) bool {
	return fc.Armed(id, fake.WatchKey{Path: k.path, Kind: k.kind})
}
func (fc *fakeCell) handle(rep int, route string, body []byte) (int, any) {
	return fc.Handle(rep, route, body)
}

func (fc *fakeCell) requests(route string) []fakeReq {
	var out []fakeReq
	for _, r := range fc.Requests(route) {
		out = append(out, fakeReq{replica: r.Replica, route: r.Route, body: r.Body, auth: r.Auth})
	}
	return out
}

// watches lists the watches the fake holds for a session.
func (fc *fakeCell) watches(id uint64) []watchKey {
	var out []watchKey
	for _, k := range fc.Watches(id) {
		out = append(out, watchKey{k.Path, k.Kind})
	}
	return out
}

func fail(code api.Code, format string, args ...any) (int, any) {
	return fake.Fail(code, format, args...)
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	a, err := fake.DeadAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", strings.TrimSpace(string(b)), err)
	}
	return v
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
