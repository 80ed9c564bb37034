package mutant

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// tableRow is one row of mutants.tsv: mutant, package, -run regex, note;
// notCaught marks a row starting "#!" (no test catches it today).
type tableRow struct {
	line      int
	mutant    Mutant
	pkg       string
	tests     string
	notCaught bool
}

// readTable parses mutants.tsv: "# " lines are comments, "#!" rows are
// rows marked not caught.
func readTable(t *testing.T, path string) []tableRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []tableRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		r := tableRow{line: n}
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#!"):
			r.notCaught, line = true, strings.TrimSpace(strings.TrimPrefix(line, "#!"))
		case strings.HasPrefix(line, "#"):
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 {
			t.Errorf("mutants.tsv:%d: %d tab-separated columns, want 4 (mutant, package, tests, note)", n, len(cols))
			continue
		}
		r.mutant, r.pkg, r.tests = Mutant(cols[0]), cols[1], cols[2]
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestEveryMutantHasOneRow holds mutants.tsv to the constants: one row
// per mutant, and no row naming something that is not one.
func TestEveryMutantHasOneRow(t *testing.T) {
	rows := readTable(t, "../../mutants.tsv")
	seen := map[Mutant]int{}
	for _, r := range rows {
		if !slices.Contains(all, r.mutant) {
			t.Errorf("mutants.tsv:%d: %q is no mutant (internal/mutant/mutant.go)", r.line, r.mutant)
		}
		if seen[r.mutant] != 0 {
			t.Errorf("mutants.tsv:%d: %q has a row already (line %d); one row per mutant, its tests in one -run regex", r.line, r.mutant, seen[r.mutant])
		}
		seen[r.mutant] = r.line
		if !strings.HasPrefix(r.pkg, "./") || r.tests == "" {
			t.Errorf("mutants.tsv:%d: package %q, tests %q: want ./dir and a -run regex", r.line, r.pkg, r.tests)
		}
	}
	for _, m := range all {
		if seen[m] == 0 {
			t.Errorf("mutant %q has no row in mutants.tsv", m)
		}
	}
}

// TestAllListsEveryConstant holds the list LOCKD_MUTANT is checked
// against to the Mutant constants declared in mutant.go.
func TestAllListsEveryConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "mutant.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Mutant" {
				for _, n := range v.Names {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	if len(declared) != len(all) {
		t.Errorf("%d Mutant constants in mutant.go, %d in all", len(declared), len(all))
	}
	values := map[Mutant]bool{}
	for _, m := range all {
		if values[m] {
			t.Errorf("%q twice in all", m)
		}
		values[m] = true
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		env     string
		want    []Mutant
		wantErr bool
	}{
		{env: "", want: nil},
		{env: "  ", want: nil},
		{env: "lockd_broken_seal", want: []Mutant{SealKeepsEphemerals}},
		{env: "lockd_broken_restoreprefixes, lockd_broken_movedelay", want: []Mutant{RestoreKeepsPrefixes, MoveDelay}},
		{env: "lockd_broken_nosuch", wantErr: true},
		{env: "lockd_broken_seal,", wantErr: true},
		{env: "SealKeepsEphemerals", wantErr: true},
	}
	for _, c := range cases {
		got, err := parse(c.env)
		if (err != nil) != c.wantErr {
			t.Errorf("parse(%q): error %v, want error %v", c.env, err, c.wantErr)
			continue
		}
		if c.wantErr {
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("parse(%q) = %v, want %v", c.env, got, c.want)
		}
		for _, m := range c.want {
			if !got[m] {
				t.Errorf("parse(%q) = %v: %q missing", c.env, got, m)
			}
		}
	}
}
