package directory

import (
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestNewRejectsBadMaps(t *testing.T) {
	good := func() []api.CellInfo {
		return []api.CellInfo{{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}}, {Name: "payments", ShardID: 2, Prefixes: []string{"/payments", "/ledger"}}}
	}
	cases := []struct {
		name   string
		break_ func([]api.CellInfo)
	}{
		{"no name", func(c []api.CellInfo) { c[0].Name = "" }},
		{"duplicate name", func(c []api.CellInfo) { c[1].Name = "demo" }},
		{"shard 0", func(c []api.CellInfo) { c[0].ShardID = 0 }},
		{"shared shard", func(c []api.CellInfo) { c[1].ShardID = 1 }},
		{"no prefix", func(c []api.CellInfo) { c[0].Prefixes = nil }},
		{"nested prefix", func(c []api.CellInfo) { c[0].Prefixes = []string{"/demo/x"} }},
		{"bad prefix", func(c []api.CellInfo) { c[0].Prefixes = []string{"demo"} }},
		{"prefix twice", func(c []api.CellInfo) { c[1].Prefixes = []string{"/demo"} }},
		{"epoch too big", func(c []api.CellInfo) { c[0].Epoch = api.MaxTokenEpoch + 1 }},
	}
	if _, err := New(good()); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		cells := good()
		c.break_(cells)
		if _, err := New(cells); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestCellFor(t *testing.T) {
	d, err := New([]api.CellInfo{{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}}, {Name: "payments", ShardID: 2, Prefixes: []string{"/payments", "/ledger"}, Epoch: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/demo": "demo", "/demo/a/b": "demo", "/ledger/x": "payments", "/payments": "payments"} {
		c, err := d.CellFor(path)
		if err != nil || c.Name != want {
			t.Errorf("CellFor(%s) = %s, %v; want %s", path, c.Name, err, want)
		}
	}
	if _, err := d.CellFor("/nope/x"); !errors.Is(err, api.ErrWrongCell) {
		t.Errorf("unknown prefix: %v", err)
	}
	if c, _ := d.Cell("demo"); c.Epoch != 1 {
		t.Errorf("default epoch %d, want 1", c.Epoch)
	}
	if cells := d.Cells(); len(cells) != 2 || cells[0].Name != "demo" {
		t.Errorf("Cells() = %v", cells)
	}
}
