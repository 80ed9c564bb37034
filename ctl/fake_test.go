package ctl

// lockctl's unit tests run against the shared fake cell (tests/fake): one
// lockd process (replica) serving the cell "demo" for the prefix /demo.

import (
	"testing"

	"github.com/lockservice/lockd/tests/fake"
)

type fakeServer struct {
	*fake.Cell
	addr string
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	c, err := fake.New(fake.Options{Name: "demo", Epoch: 2, Term: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeServer{Cell: c, addr: c.Addr(0)}
}

// requests lists the bodies of the requests received on route.
func (f *fakeServer) requests(route string) [][]byte {
	var out [][]byte
	for _, r := range f.Requests(route) {
		out = append(out, r.Body)
	}
	return out
}

// auths lists the Authorization header of every request received.
func (f *fakeServer) auths() []string {
	var out []string
	for _, r := range f.Requests("") {
		out = append(out, r.Auth)
	}
	return out
}

func deadAddr(t *testing.T) string {
	a, err := fake.DeadAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
