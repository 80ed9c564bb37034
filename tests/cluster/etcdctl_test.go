package cluster

import (
	"os"
	"strings"
	"testing"
)

// TestEtcdctlBinaries finds Debian's etcdctl 3.4 and builds (or reuses)
// the module's etcdctl, each answering `etcdctl version` with its own
// version. A missing one skips naming why, unless LOCKD_REQUIRE_ETCD is
// set (CI), where it fails.
func TestEtcdctlBinaries(t *testing.T) {
	for _, c := range []struct {
		name string
		get  func() (Etcdctl, error)
		want string
	}{
		{"debian", EtcdctlDebian, "3.4."},
		{"module", EtcdctlModule, strings.TrimPrefix(EtcdctlModuleVersion, "v")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := c.get()
			if err != nil {
				if os.Getenv("LOCKD_REQUIRE_ETCD") != "" {
					t.Fatalf("LOCKD_REQUIRE_ETCD is set (CI): %v", err)
				}
				t.Skipf("etcdctl %s missing: %v", c.name, err)
			}
			if !strings.HasPrefix(e.Version, c.want) || e.Path == "" {
				t.Fatalf("%+v: want version %s", e, c.want)
			}
			v, err := etcdctlVersion(e.Path)
			if err != nil || v != e.Version {
				t.Fatalf("%s version: %q, %v; want %s", e.Path, v, err, e.Version)
			}
		})
	}
}
