package archtest

import (
	"slices"
	"testing"
)

const sampleMap = "# Map\n\n" +
	"| package | owns | may import | tests may also import |\n" +
	"|---|---|---|---|\n" +
	"| `api` | types | — | — |\n" +
	"| `server/fsm` | state | `api` | — |\n" +
	"| `sdk` | client | `api` | `tests/fake` |\n" +
	"| `tests/fake` | fake | `api`, `server/fsm` | — |\n" +
	"\nAfter the table.\n"

func TestParseMap(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		rows       int
		wantErr    bool
	}{
		{"the sample", sampleMap, 4, false},
		{"no table", "# Map\n\nNothing here.\n", 0, true},
		{"no test column", "| package | may import |\n|---|---|\n| `api` | — |\n", 0, true},
		{"two rows for one package", "| package | may import | tests may also import |\n|---|---|---|\n| `api` | — | — |\n| `api` | — | — |\n", 0, true},
		{"a row without a package", "| package | may import | tests may also import |\n|---|---|---|\n| api | — | — |\n", 0, true},
		{"a short row", "| package | may import | tests may also import |\n|---|---|---|\n| `api` | — |\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := parseMap(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(table) != tc.rows {
				t.Fatalf("%d rows, want %d", len(table), tc.rows)
			}
		})
	}
	table, _ := parseMap(sampleMap)
	if r := table["tests/fake"]; !r.imports["server/fsm"] || !r.imports["api"] || len(r.testImports) != 0 {
		t.Fatalf("tests/fake row = %+v", r)
	}
}

func TestCheck(t *testing.T) {
	table, err := parseMap(sampleMap)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{"all allowed", []pkg{
			{path: "api"},
			{path: "server/fsm", imports: []string{"api"}},
			{path: "sdk", imports: []string{"api"}, testImports: []string{"api", "tests/fake"}},
			{path: "tests/fake", imports: []string{"api", "server/fsm"}},
		}, nil},
		{"a forbidden arrow", []pkg{
			{path: "api", imports: []string{"server/fsm"}},
		}, []string{"api imports server/fsm: ARCHITECTURE.md does not allow it (api may import: —)"}},
		{"a test-only arrow in production code", []pkg{
			{path: "sdk", imports: []string{"api", "tests/fake"}},
		}, []string{"sdk imports tests/fake: ARCHITECTURE.md does not allow it (sdk may import: api)"}},
		{"a forbidden test arrow", []pkg{
			{path: "server/fsm", imports: []string{"api"}, testImports: []string{"sdk"}},
		}, []string{"server/fsm's tests import sdk: ARCHITECTURE.md does not allow it (server/fsm's tests may import: api)"}},
		{"a package the map lacks", []pkg{
			{path: "server/new", imports: []string{"api"}},
		}, []string{"package server/new is missing from ARCHITECTURE.md's import table"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(table, tc.pkgs); !slices.Equal(got, tc.want) {
				t.Fatalf("check = %q\nwant    %q", got, tc.want)
			}
		})
	}
}

func TestCheckNamesUnknownTargets(t *testing.T) {
	table, err := parseMap("| package | may import | tests may also import |\n|---|---|---|\n| `sdk` | `api` | `tests/fake` |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sdk's row allows api, which has no row of its own",
		"sdk's row allows tests/fake, which has no row of its own",
	}
	if got := check(table, nil); !slices.Equal(got, want) {
		t.Fatalf("check = %q\nwant    %q", got, want)
	}
}

func TestParseList(t *testing.T) {
	const module = "example.com/m"
	out := "example.com/m/api\t\t \n" +
		"example.com/m/sdk\tcontext example.com/m/api\texample.com/m/tests/fake example.com/m/sdk\n" +
		"other.org/x\texample.com/m/api\t\n"
	got := parseList(out, module)
	want := []pkg{
		{path: "api"},
		{path: "sdk", imports: []string{"api"}, testImports: []string{"tests/fake"}},
	}
	if len(got) != len(want) {
		t.Fatalf("parseList = %+v", got)
	}
	for i := range want {
		if got[i].path != want[i].path || !slices.Equal(got[i].imports, want[i].imports) || !slices.Equal(got[i].testImports, want[i].testImports) {
			t.Fatalf("parseList[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
