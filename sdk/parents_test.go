package sdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// Put and Create make missing parents by default, as lockctl put does;
// NoParents refuses instead, with an error that says how to get the
// default (issue 28: the README's first Put failed on a missing parent).
func TestParentsByDefault(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		if _, err := c.Put(ctx, "/demo/config/flag", []byte("on")); err != nil {
			t.Fatalf("put under a missing parent: %v", err)
		}
		if _, err := c.Create(ctx, "/demo/a/b/c", []byte("x")); err != nil {
			t.Fatalf("create under missing parents: %v", err)
		}
		if _, err := c.Put(ctx, "/demo/made/explicitly", nil, MakeParents()); err != nil {
			t.Fatalf("put with MakeParents: %v", err)
		}
		for name, write := range map[string]func() error{
			"put":    func() error { _, err := c.Put(ctx, "/demo/none/x", []byte("v"), NoParents()); return err },
			"create": func() error { _, err := c.Create(ctx, "/demo/none/y", nil, NoParents()); return err },
		} {
			err := write()
			if !errors.Is(err, ErrNoNode) || api.CodeOf(err) != api.CodeNoNode || !strings.Contains(err.Error(), "without it a Put or Create creates them") {
				t.Fatalf("%s with NoParents: %v, want no_node saying how to create parents", name, err)
			}
		}
		if _, err := c.Get(ctx, "/demo/none"); !errors.Is(err, ErrNoNode) {
			t.Fatalf("a refused write made its parent: %v", err)
		}
		// A CAS on a missing node makes no parent either.
		if _, err := c.Put(ctx, "/demo/cas/x", []byte("v"), WithVersion(3)); !errors.Is(err, ErrNoNode) {
			t.Fatalf("CAS on a missing node: %v", err)
		}
		if _, err := c.Get(ctx, "/demo/cas"); !errors.Is(err, ErrNoNode) {
			t.Fatalf("a refused CAS made its parent: %v", err)
		}
	})
}
