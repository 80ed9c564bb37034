package directory

import (
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
)

func goodResponse() api.DirectoryResponse {
	return api.DirectoryResponse{
		Cells: []api.CellInfo{{Name: "demo", ShardID: 1}, {Name: "payments", ShardID: 2}},
		Prefixes: []api.PrefixInfo{
			{Prefix: "/demo", Cell: "demo", Epoch: 1},
			{Prefix: "/payments", Cell: "payments", Epoch: 1},
			{Prefix: "/ledger", Cell: "payments", Epoch: 3},
		},
	}
}

func TestNewRejectsBadMaps(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(*api.DirectoryResponse)
	}{
		{"no name", func(d *api.DirectoryResponse) { d.Cells[0].Name = "" }},
		{"duplicate name", func(d *api.DirectoryResponse) { d.Cells[1].Name = "demo" }},
		{"shard 0", func(d *api.DirectoryResponse) { d.Cells[0].ShardID = 0 }},
		{"the directory's shard", func(d *api.DirectoryResponse) { d.Cells[0].ShardID = ShardID }},
		{"shared shard", func(d *api.DirectoryResponse) { d.Cells[1].ShardID = 1 }},
		{"nested prefix", func(d *api.DirectoryResponse) { d.Prefixes[0].Prefix = "/demo/x" }},
		{"bad prefix", func(d *api.DirectoryResponse) { d.Prefixes[0].Prefix = "demo" }},
		{"prefix twice", func(d *api.DirectoryResponse) { d.Prefixes[1].Prefix = "/demo" }},
		{"unknown cell", func(d *api.DirectoryResponse) { d.Prefixes[1].Cell = "nope" }},
		{"epoch 0", func(d *api.DirectoryResponse) { d.Prefixes[0].Epoch = 0 }},
		{"epoch too big", func(d *api.DirectoryResponse) { d.Prefixes[0].Epoch = api.MaxTokenEpoch + 1 }},
	}
	if _, err := New(goodResponse()); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		d := goodResponse()
		c.break_(&d)
		if _, err := New(d); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestCellFor(t *testing.T) {
	d, err := New(goodResponse())
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
	if p, _ := d.PrefixFor("/ledger/a"); p.Epoch != 3 {
		t.Errorf("epoch of /ledger %d, want 3", p.Epoch)
	}
	if cells := d.Cells(); len(cells) != 2 || cells[0].Name != "demo" {
		t.Errorf("Cells() = %v", cells)
	}
}
