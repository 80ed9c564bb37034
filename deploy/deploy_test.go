// Package deploy_test checks the deployment files against the binaries:
// every flag they pass exists, and their names, ports and replica counts
// agree with each other.
package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockservice/lockd/tests/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Cleanup()
	os.Exit(code)
}

// flagsOf lists the long flags a command's --help names.
func flagsOf(t *testing.T, bin string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v --help: %v\n%s", bin, args, err, out)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("%s %v --help lists no flags:\n%s", bin, args, out)
	}
	return flags
}

// invocation is one command line a deployment file runs.
type invocation struct {
	file, command string
	flags         map[string][]string // flag → values, in order
}

var (
	// lockd serve … or lockproxy …, up to the end of the YAML scalar or line.
	lockdRe = regexp.MustCompile(`lockd serve((?:\s+--[a-z-]+(?:[ =](?:"[^"]*"|[^\s"-][^\s"]*|\$\S+))?)+)`)
	proxyRe = regexp.MustCompile(`lockproxy((?:\s+--[a-z-]+(?:[ =](?:"[^"]*"|[^\s"-][^\s"]*|\$\S+))?)+)`)
	flagRe  = regexp.MustCompile(`--([a-z-]+)(?:[ =]("[^"]*"|[^\s"-][^\s"]*|\$\S+))?`)
)

// invocations finds every lockd serve and lockproxy command line in the
// deployment files (YAML folded lines joined first).
func invocations(t *testing.T) []invocation {
	t.Helper()
	var out []invocation
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := regexp.MustCompile(`\n\s+`).ReplaceAllString(string(b), " ")
		for _, c := range []struct {
			name string
			re   *regexp.Regexp
		}{{"lockd", lockdRe}, {"lockproxy", proxyRe}} {
			for _, m := range c.re.FindAllStringSubmatch(text, -1) {
				inv := invocation{file: path, command: c.name, flags: map[string][]string{}}
				for _, f := range flagRe.FindAllStringSubmatch(m[1], -1) {
					inv.flags[f[1]] = append(inv.flags[f[1]], strings.Trim(f[2], `"`))
				}
				out = append(out, inv)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeployFilesUseRealFlags: every flag a deployment file passes to
// lockd serve or lockproxy is one the binary has, and each file that runs
// a lockd gives it what it cannot start without.
func TestDeployFilesUseRealFlags(t *testing.T) {
	lockd := cluster.Build(t, "./server/cmd/lockd")
	proxy := cluster.Build(t, "./proxy/cmd/lockproxy")
	known := map[string][]string{"lockd": flagsOf(t, lockd, "serve"), "lockproxy": flagsOf(t, proxy)}
	invs := invocations(t)
	seen := map[string]int{}
	for _, inv := range invs {
		seen[inv.command]++
		for f := range inv.flags {
			if !slices.Contains(known[inv.command], f) {
				t.Errorf("%s: %s --%s: no such flag (it has %v)", inv.file, inv.command, f, known[inv.command])
			}
		}
		var need []string
		switch inv.command {
		case "lockd":
			need = []string{"id", "data-dir"}
			if len(inv.flags["config"]) == 0 {
				need = append(need, "peer", "cell")
			}
		case "lockproxy":
			need = []string{"name", "listen", "lockd"}
		}
		for _, f := range need {
			if len(inv.flags[f]) == 0 {
				t.Errorf("%s: %s without --%s", inv.file, inv.command, f)
			}
		}
		checkRaftTLS(t, inv)
	}
	// systemd: 1 + 1; compose: 5 + 2; k8s: 1 + 1.
	if seen["lockd"] < 7 || seen["lockproxy"] < 4 {
		t.Fatalf("found %v invocations; the files changed shape (the test reads systemd, compose and k8s)", seen)
	}
}

// checkRaftTLS: a lockd given the API's TLS files is given Raft's too, on
// another CA file (a lockd refuses to start otherwise: the Raft port must
// not take the applications' certificates); a lockproxy gets no Raft file.
func checkRaftTLS(t *testing.T, inv invocation) {
	t.Helper()
	raft := []string{"raft-tls-cert", "raft-tls-key", "raft-tls-ca"}
	if inv.command == "lockproxy" {
		for _, f := range raft {
			if len(inv.flags[f]) > 0 {
				t.Errorf("%s: lockproxy --%s: only lockds hold Raft files", inv.file, f)
			}
		}
		return
	}
	if len(inv.flags["tls-cert"]) == 0 {
		return
	}
	for _, f := range raft {
		if len(inv.flags[f]) == 0 {
			t.Errorf("%s: lockd with --tls-cert but without --%s", inv.file, f)
		}
	}
	if ca := inv.flags["raft-tls-ca"]; len(ca) > 0 && len(inv.flags["tls-ca"]) > 0 && ca[0] == inv.flags["tls-ca"][0] {
		t.Errorf("%s: lockd --raft-tls-ca is --tls-ca (%s): Raft needs a CA of its own", inv.file, ca[0])
	}
}

// TestExampleConfigHasRaftTLS: lockd.example.json gives the API's TLS
// files and Raft's, on two CA files.
func TestExampleConfigHasRaftTLS(t *testing.T) {
	b, err := os.ReadFile("lockd.example.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tls_cert", "tls_key", "tls_ca", "raft_tls_cert", "raft_tls_key", "raft_tls_ca"} {
		if v, _ := cfg[k].(string); v == "" {
			t.Errorf("lockd.example.json has no %s", k)
		}
	}
	if cfg["raft_tls_ca"] == cfg["tls_ca"] {
		t.Errorf("lockd.example.json: raft_tls_ca is tls_ca (%v): Raft needs a CA of its own", cfg["tls_ca"])
	}
}

// TestComposeAgrees: the compose file's five lockds name each other as
// peers by their service names and ports, span three zones 2+2+1, and its
// proxies point at lockds that exist.
func TestComposeAgrees(t *testing.T) {
	b, err := os.ReadFile("compose/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z0-9]+):$`).FindAllStringSubmatch(string(b), -1) {
		services[m[1]] = true
	}
	zones := map[string]int{}
	var lockds int
	for _, inv := range invocations(t) {
		if inv.file != filepath.Join("compose", "docker-compose.yml") {
			continue
		}
		if inv.command == "lockproxy" {
			for _, ep := range strings.Split(inv.flags["lockd"][0], ",") {
				if host, port, _ := strings.Cut(ep, ":"); !services[host] || port != "7000" {
					t.Errorf("a proxy's --lockd %s is no lockd API address of the file", ep)
				}
			}
			continue
		}
		lockds++
		zones[inv.flags["zone"][0]]++
		if got := len(inv.flags["peer"]); got != 5 {
			t.Errorf("lockd --id %v has %d peers, want 5", inv.flags["id"], got)
		}
		for _, p := range inv.flags["peer"] {
			parts := strings.Split(p, ",")
			if len(parts) != 3 {
				t.Fatalf("--peer %s: want ID,RAFT_ADDR,API_ADDR", p)
			}
			for i, want := range []string{"7100", "7000"} {
				host, port, _ := strings.Cut(parts[i+1], ":")
				if !services[host] || port != want || host != "lockd"+parts[0] {
					t.Errorf("--peer %s: %s is not service lockd%s on port %s", p, parts[i+1], parts[0], want)
				}
			}
		}
	}
	counts := []int{}
	for _, n := range zones {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	if lockds != 5 || !slices.Equal(counts, []int{1, 2, 2}) {
		t.Fatalf("%d lockds over zones %v: want five spread 2+2+1", lockds, zones)
	}
}

// TestKubernetesAgrees: the StatefulSet runs five replicas whose peers are
// its own pods through its headless Service, spread over zones, and the
// disruption budget keeps a majority.
func TestKubernetesAgrees(t *testing.T) {
	b, err := os.ReadFile("k8s/lockd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{
		"kind: StatefulSet", "replicas: 5", "serviceName: lockd", "clusterIP: None",
		"topologyKey: topology.kubernetes.io/zone", "maxSkew: 1",
		"kind: PodDisruptionBudget", "minAvailable: 3",
		"containerPort: 7000", "containerPort: 7100",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("k8s/lockd.yaml lacks %q", want)
		}
	}
	for _, inv := range invocations(t) {
		if inv.file != filepath.Join("k8s", "lockd.yaml") || inv.command != "lockd" {
			continue
		}
		for i, p := range inv.flags["peer"] {
			want := []string{
				itoa(i+1) + ",lockd-" + itoa(i) + ".lockd:7100,lockd-" + itoa(i) + ".lockd:7000",
			}
			if p != want[0] {
				t.Errorf("--peer %s, want %s (pod ordinal %d is lockd %d)", p, want[0], i, i+1)
			}
		}
		if len(inv.flags["peer"]) != 5 {
			t.Errorf("%d peers, want 5", len(inv.flags["peer"]))
		}
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestMonitoringNamesRealSeries: the dashboard is valid JSON, and every
// metric the dashboard and the alert rules query is one lockd, lockproxy
// or the SDK's fence defines (a renamed metric must not leave a silent
// panel or an alert that never fires).
func TestMonitoringNamesRealSeries(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exprs := ""
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			exprs += q.Expr + "\n"
		}
	}
	rules, err := os.ReadFile("monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rules), "- alert: "); n < 6 {
		t.Fatalf("alerts.yml has %d alerts", n)
	}
	exprs += string(rules)
	var code strings.Builder
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "tests") || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		code.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b(lockd|lockproxy)_[a-z_]+`).FindAllString(exprs, -1) {
		names[regexp.MustCompile(`_(bucket|count|sum)$`).ReplaceAllString(m, "")] = true
	}
	if len(names) < 10 {
		t.Fatalf("only %d metrics named: %v", len(names), names)
	}
	for n := range names {
		if !strings.Contains(code.String(), `"`+n+`"`) {
			t.Errorf("monitoring names %s, which no lockd, lockproxy or fence code defines", n)
		}
	}
}
