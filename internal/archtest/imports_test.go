package archtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// mapFile is the map whose import table the module's imports must follow,
// relative to the module root.
const mapFile = "ARCHITECTURE.md"

// tagSets are the build tag sets whose imports are checked: the production
// build, and the builds with the deliberately broken code and the disk
// faults compiled in (files that only those tags select may import too).
var tagSets = []string{"", "lockd_mutants,lockd_faults"}

// rule is one row of the import table: the module packages a package's
// non-test files may import, and those its _test.go files may import on
// top of them.
type rule struct {
	imports, testImports map[string]bool
}

// pkg is one package of the module as `go list` sees it, every path
// relative to the module ("server/fsm").
type pkg struct {
	path        string
	imports     []string
	testImports []string // in-package and external test files'
}

// TestImportsFollowTheMap fails on every module-internal import
// ARCHITECTURE.md's table does not allow and every package it does not
// list. Imports from the standard library and other modules are not
// checked.
func TestImportsFollowTheMap(t *testing.T) {
	module, root := moduleRoot(t)
	text, err := os.ReadFile(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	table, err := parseMap(string(text))
	if err != nil {
		t.Fatalf("%s: %v", mapFile, err)
	}
	var pkgs []pkg
	for _, tags := range tagSets {
		out := goList(t, root, tags)
		pkgs = append(pkgs, parseList(out, module)...)
	}
	pkgs = merge(pkgs)
	for _, problem := range check(table, pkgs) {
		t.Error(problem)
	}
	for _, p := range absent(table, pkgs) {
		t.Logf("%s lists %s, which the module does not have (yet)", mapFile, p)
	}
}

// moduleRoot returns the module's path and its root directory.
func moduleRoot(t *testing.T) (module, root string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module, root, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if !ok {
		t.Fatalf("go list -m: unexpected output %q", out)
	}
	return module, root
}

// goList runs `go list ./...` in the module root with the given build tags
// and returns one line per package: path, imports, test imports, separated
// by tabs.
func goList(t *testing.T, root, tags string) string {
	t.Helper()
	args := []string{"list"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "-f",
		`{{.ImportPath}}{{"\t"}}{{join .Imports " "}}{{"\t"}}{{join .TestImports " "}} {{join .XTestImports " "}}`,
		"./...")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// tableHeader is the header row of the import table in ARCHITECTURE.md.
var tableHeader = regexp.MustCompile(`^\|\s*package\s*\|`)

// quoted finds the backquoted names in a cell.
var quoted = regexp.MustCompile("`([^`]+)`")

// parseMap reads the import table: the first markdown table whose header
// starts with "package" and has the columns "may import" and "tests may
// also import". Each name is backquoted; "—" means none.
func parseMap(text string) (map[string]rule, error) {
	lines := strings.Split(text, "\n")
	start := slices.IndexFunc(lines, tableHeader.MatchString)
	if start < 0 {
		return nil, fmt.Errorf("no table with a %q header", "| package |")
	}
	header := cells(lines[start])
	imp := slices.Index(header, "may import")
	test := slices.Index(header, "tests may also import")
	if imp < 0 || test < 0 {
		return nil, fmt.Errorf("import table header %q lacks %q or %q", lines[start], "may import", "tests may also import")
	}
	table := map[string]rule{}
	for i, line := range lines[start+1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 && strings.HasPrefix(line, "|-") {
			continue // the separator row
		}
		row := cells(line)
		if len(row) != len(header) {
			return nil, fmt.Errorf("row %q has %d columns, the header %d", line, len(row), len(header))
		}
		name := names(row[0])
		if len(name) != 1 {
			return nil, fmt.Errorf("row %q does not name one package", line)
		}
		if _, dup := table[name[0]]; dup {
			return nil, fmt.Errorf("package %s has two rows", name[0])
		}
		table[name[0]] = rule{imports: set(names(row[imp])), testImports: set(names(row[test]))}
	}
	return table, nil
}

// cells splits a markdown table row into its trimmed cells.
func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// names returns the backquoted names of a cell.
func names(cell string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

func set(xs []string) map[string]bool {
	s := map[string]bool{}
	for _, x := range xs {
		s[x] = true
	}
	return s
}

// parseList reads goList's lines, keeping only the module's own packages
// and imports, relative to the module.
func parseList(out, module string) []pkg {
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		path, ok := inModule(f[0], module)
		if !ok {
			continue
		}
		pkgs = append(pkgs, pkg{path: path, imports: internal(f[1], module, path), testImports: internal(f[2], module, path)})
	}
	return pkgs
}

// inModule returns an import path relative to the module, if it is in it.
func inModule(path, module string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// internal returns the module packages among space-separated import
// paths, relative to the module, without self.
func internal(field, module, self string) []string {
	var out []string
	for _, imp := range strings.Fields(field) {
		if p, ok := inModule(imp, module); ok && p != self && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// merge joins the imports of one package listed under several tag sets.
func merge(pkgs []pkg) []pkg {
	byPath := map[string]*pkg{}
	var order []string
	for _, p := range pkgs {
		m, ok := byPath[p.path]
		if !ok {
			m = &pkg{path: p.path}
			byPath[p.path] = m
			order = append(order, p.path)
		}
		m.imports = union(m.imports, p.imports)
		m.testImports = union(m.testImports, p.testImports)
	}
	sort.Strings(order)
	out := make([]pkg, 0, len(order))
	for _, path := range order {
		out = append(out, *byPath[path])
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// check returns every way the packages break the table: a package with no
// row, an import its row does not allow, a test import neither of its
// columns allows, and a row allowing a package that has no row.
func check(table map[string]rule, pkgs []pkg) []string {
	var problems []string
	for _, p := range pkgs {
		r, ok := table[p.path]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s is missing from %s's import table", p.path, mapFile))
			continue
		}
		for _, imp := range p.imports {
			if !r.imports[imp] {
				problems = append(problems, fmt.Sprintf("%s imports %s: %s does not allow it (%s may import: %s)", p.path, imp, mapFile, p.path, show(sortedUnion(r.imports))))
			}
		}
		for _, imp := range p.testImports {
			if !r.imports[imp] && !r.testImports[imp] {
				problems = append(problems, fmt.Sprintf("%s's tests import %s: %s does not allow it (%s's tests may import: %s)", p.path, imp, mapFile, p.path, show(sortedUnion(r.imports, r.testImports))))
			}
		}
	}
	for _, name := range sortedKeys(table) {
		r := table[name]
		for _, target := range sortedUnion(r.imports, r.testImports) {
			if _, ok := table[target]; !ok {
				problems = append(problems, fmt.Sprintf("%s's row allows %s, which has no row of its own", name, target))
			}
		}
	}
	return problems
}

// absent returns the table's packages the module does not have.
func absent(table map[string]rule, pkgs []pkg) []string {
	have := map[string]bool{}
	for _, p := range pkgs {
		have[p.path] = true
	}
	var out []string
	for _, name := range sortedKeys(table) {
		if !have[name] {
			out = append(out, name)
		}
	}
	return out
}

// sortedUnion returns the union of sets, sorted.
func sortedUnion(sets ...map[string]bool) []string {
	var out []string
	for _, s := range sets {
		for k := range s {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// show writes names as the table does: comma-separated, "—" for none.
func show(names []string) string {
	if len(names) == 0 {
		return "—"
	}
	return strings.Join(names, ", ")
}

func sortedKeys(table map[string]rule) []string {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
