package etcdgw

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestKeyPath(t *testing.T) {
	k, err := newKeyspace("/etcd", newCoreBackend())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key, path string
		rel       bool
		code      codes.Code
	}{
		{"foo", "/etcd/foo", true, codes.OK},
		{"a/b", "/etcd/a/b", true, codes.OK},
		{"/demo/x", "/demo/x", false, codes.OK},
		{"/demo", "/demo", false, codes.OK},
		{"", "", false, codes.InvalidArgument},
		{"/nowhere/x", "", false, codes.InvalidArgument},
		{"/demo/", "", false, codes.InvalidArgument},
		{"a//b", "", false, codes.InvalidArgument},
		{"/demo/../x", "", false, codes.InvalidArgument},
		{"a\x01", "", false, codes.InvalidArgument},
	}
	for _, c := range cases {
		p, err := k.path([]byte(c.key))
		if status.Code(err) != c.code {
			t.Errorf("path(%q): %v, want %v", c.key, err, c.code)
			continue
		}
		if err == nil && (p.Path != c.path || p.Rel != c.rel) {
			t.Errorf("path(%q) = %+v, want %s rel %v", c.key, p, c.path, c.rel)
		}
		if err == nil && string(k.key(p.Path, p.Rel)) != c.key {
			t.Errorf("key(path(%q)) = %q", c.key, k.key(p.Path, p.Rel))
		}
	}
	if _, err := (keyspace{be: newCoreBackend()}).path([]byte("foo")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("relative key without a default prefix: %v", err)
	}
}

func TestKeySpan(t *testing.T) {
	k, _ := newKeyspace("/etcd", newCoreBackend())
	cases := []struct {
		name, key, end    string
		start, stop, root string
		code              codes.Code
	}{
		{"single", "foo", "", "/etcd/foo", "", "/etcd/foo", codes.OK},
		{"relative prefix", "dir/", "dir0", "/etcd/dir/", "/etcd/dir0", "/etcd/dir", codes.OK},
		{"relative prefix no slash", "dir", "dis", "/etcd/dir", "/etcd/dis", "/etcd", codes.OK},
		{"every relative key", "\x00", "\x00", "/etcd/", "/etcd0", "/etcd", codes.OK},
		{"relative from key", "m", "\x00", "/etcd/m", "/etcd0", "/etcd", codes.OK},
		{"absolute prefix", "/demo/locks/", "/demo/locks0", "/demo/locks/", "/demo/locks0", "/demo/locks", codes.OK},
		{"absolute prefix get", "/demo/locks", "/demo/lockt", "/demo/locks", "/demo/lockt", "/demo", codes.OK},
		{"absolute from key", "/demo/m", "\x00", "/demo/m", "/demo0", "/demo", codes.OK},
		{"whole prefix", "/demo", "/demp", "/demo", "/demo0", "/demo", codes.OK},
		{"two cells", "/demo", "/etcd0", "", "", "", codes.FailedPrecondition},
		{"root over three", "/", "0", "", "", "", codes.FailedPrecondition},
		{"nothing served", "/zzz", "/zzz0", "", "", "", codes.InvalidArgument},
		{"empty key", "", "x", "", "", "", codes.InvalidArgument},
	}
	for _, c := range cases {
		s, err := k.span([]byte(c.key), []byte(c.end))
		if status.Code(err) != c.code {
			t.Errorf("%s: span: %v, want %v", c.name, err, c.code)
			continue
		}
		if err == nil && (s.Start != c.start || s.End != c.stop || s.Root != c.root) {
			t.Errorf("%s: span = [%q, %q) root %q, want [%q, %q) root %q", c.name, s.Start, s.End, s.Root, c.start, c.stop, c.root)
		}
	}
}

func TestSpanRootStaysAtOrBelowFloor(t *testing.T) {
	cases := []struct{ start, stop, floor, want string }{
		{"/demo/a/b", "/demo/a/b\x00", "/demo", "/demo/a/b"},
		{"/demo/a/", "/demo/a0", "/demo", "/demo/a"},
		{"/demo/a", "/demo/b", "/demo", "/demo"},
		{"/demo/a/b/c", "/demo/a/c", "/demo", "/demo/a"},
	}
	for _, c := range cases {
		if got := spanRoot(c.start, c.stop, c.floor); got != c.want {
			t.Errorf("spanRoot(%q, %q) = %q, want %q", c.start, c.stop, got, c.want)
		}
	}
}
