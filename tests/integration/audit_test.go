package integration_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const auditAdminToken = "admin-token-of-the-audit-test"

// auditLine is the part of an audit record (server/audit) the test reads.
type auditLine struct {
	Action        string `json:"action"`
	Step          string `json:"step"`
	Result        string `json:"result"`
	Tenant        string `json:"tenant"`
	TokenID       string `json:"token_id"`
	ClientAddr    string `json:"client_addr"`
	ClaimedClient string `json:"claimed_client"`
	Target        struct {
		Tenant  string `json:"tenant"`
		TokenID string `json:"token_id"`
		Prefix  string `json:"prefix"`
		To      string `json:"to"`
		Path    string `json:"path"`
		Owner   uint64 `json:"owner"`
	} `json:"target"`
}

// TestAuditLogOnRealLockds runs three lockds that require tokens, each
// with --audit-file, and checks the records of a tenant made (and its
// token), an admin route refused to the tenant (directly and through a
// lockproxy, which forwards its client's address as a claim), an admin's
// delete of the tenant's ephemeral node, a prefix moved, and the token
// revoked; and that no record, in the files or the lockds' logs, holds a
// token or a session secret.
func TestAuditLogOnRealLockds(t *testing.T) {
	t.Parallel()
	files := t.TempDir()
	replicaArgs := map[int][]string{}
	for id := 1; id <= 3; id++ {
		replicaArgs[id] = []string{"--audit-file", filepath.Join(files, fmt.Sprintf("audit-%d.log", id)), "--audit-max-mb", "1", "--audit-keep", "2"}
	}
	c := cluster.Start(t, cluster.Options{Replicas: 3, AdminToken: auditAdminToken, ReplicaArgs: replicaArgs})
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: auditAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()

	tenant := api.Tenant{Name: "team-a", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleLock}}}}
	var resp api.TenantResponse
	for attempt := 0; ; attempt++ { // the directory bootstraps just after the cells lead
		resp, err = adm.PutTenant(ctx, tenant, true)
		if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	must(t, err)
	token := resp.Token
	secrets := []string{auditAdminToken, token}

	// The tenant holds an ephemeral lock node; it asks for an admin route.
	mustDo(t, authClient(c, auditAdminToken), api.RoutePut, api.PutRequest{Path: "/demo/a/lk/keep", Value: []byte("v"), MakeParents: true}, nil)
	locker := authClient(c, token)
	ls := openSession(t, locker, "demo", 20*time.Second)
	secrets = append(secrets, ls.secret)
	var cr api.CreateResponse
	mustDo(t, locker, api.RouteCreate, api.CreateRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/lock-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive}, &cr)
	var eph api.CreateResponse // deleted by the admin through a transaction, below
	mustDo(t, locker, api.RouteCreate, api.CreateRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/lock-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive}, &eph)
	if err := do(locker, api.RouteAdminTenant, api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "mine"}}, nil); api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("a tenant's admin call: %v", err)
	}
	// The same refusal through a lockproxy: the record names the proxy's
	// client as claimed.
	px, err := c.StartProxy("audit-proxy")
	must(t, err)
	viaProxy := cluster.NewClient(px.Addr)
	viaProxy.Token = token
	if err := do(viaProxy, api.RouteAdminCellCreate, api.CreateCellRequest{Name: "mine"}, nil); api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("a tenant's admin call through the proxy: %v", err)
	}
	// The admin removes the tenant's lock node (no session of its own).
	mustDo(t, authClient(c, auditAdminToken), api.RouteDelete, api.DeleteRequest{Path: cr.Node.Path}, nil)
	// And another through a transaction: recorded the same way.
	var tr api.TxnResponse
	mustDo(t, authClient(c, auditAdminToken), api.RouteTxn, api.TxnRequest{Then: []api.TxnOp{{Op: api.TxnDelete, Path: eph.Node.Path}}}, &tr)
	if !tr.Succeeded {
		t.Fatalf("the admin's txn delete: %+v", tr)
	}

	_, err = adm.MovePrefix(ctx, "/demo", "payments", nil)
	must(t, err)
	_, err = adm.RevokeTenantTokens(ctx, "team-a")
	must(t, err)

	recs := readAuditFiles(t, files, secrets)
	tokenID := tokenIDOf(token)
	checkAudit(t, recs, []auditCheck{
		{"the tenant made", func(r auditLine) bool {
			return r.Action == "tenant" && r.Step == "put" && r.Target.Tenant == "team-a" && r.Tenant == api.BootstrapAdmin && r.Result == "ok"
		}},
		{"its token issued, by id", func(r auditLine) bool {
			return r.Action == "token.issue" && r.Target.Tenant == "team-a" && r.Target.TokenID == tokenID && r.Result == "ok"
		}},
		{"the tenant's admin call refused", func(r auditLine) bool {
			return r.Action == "tenant" && r.Tenant == "team-a" && r.TokenID == tokenID && r.Result == "forbidden" && r.ClaimedClient == ""
		}},
		{"the refusal through the proxy, its client claimed", func(r auditLine) bool {
			return r.Action == "cell.create" && r.Tenant == "team-a" && r.Result == "forbidden" && strings.HasPrefix(r.ClaimedClient, "127.0.0.1:")
		}},
		{"the admin's delete of the tenant's node", func(r auditLine) bool {
			return r.Action == "node.delete_other" && r.Target.Path == cr.Node.Path && r.Target.Owner == ls.id && r.Result == "ok"
		}},
		{"the admin's delete of the tenant's node through a transaction", func(r auditLine) bool {
			return r.Action == "node.delete_other" && r.Target.Path == eph.Node.Path && r.Target.Owner == ls.id && r.Result == "ok"
		}},
		{"the move begun", func(r auditLine) bool {
			return r.Action == "prefix.move" && r.Step == api.MigrateBegin && r.Target.Prefix == "/demo" && r.Target.To == "payments" && r.Result == "ok"
		}},
		{"the move committed", func(r auditLine) bool {
			return r.Action == "prefix.move" && r.Step == api.MigrateCommit && r.Target.Prefix == "/demo" && r.Result == "ok"
		}},
		{"the token revoked", func(r auditLine) bool {
			return r.Action == "token.revoke" && r.Target.Tenant == "team-a" && r.Tenant == api.BootstrapAdmin && r.Result == "ok"
		}},
	})
	for id := 1; id <= 3; id++ { // the same records in the lockds' logs
		log, err := os.ReadFile(c.Node(id).LogPath)
		must(t, err)
		for _, line := range bytes.Split(log, []byte("\n")) {
			if bytes.Contains(line, []byte("audit=true")) {
				scanSecrets(t, c.Node(id).LogPath, line, secrets)
			}
		}
	}
}

type auditCheck struct {
	name string
	ok   func(auditLine) bool
}

// checkAudit fails for each check no record passes.
func checkAudit(t *testing.T, recs []auditLine, checks []auditCheck) {
	t.Helper()
	for _, ch := range checks {
		found := false
		for _, r := range recs {
			if ch.ok(r) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no audit record: %s", ch.name)
		}
	}
	if t.Failed() {
		for _, r := range recs {
			t.Logf("record %+v", r)
		}
	}
}

// maxAuditLines bounds the records the test reads.
const maxAuditLines = 10_000

// readAuditFiles reads every record in dir's files, failing on one that
// holds a secret.
func readAuditFiles(t *testing.T, dir string, secrets []string) []auditLine {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var out []auditLine
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		must(t, err)
		scanSecrets(t, path, b, secrets)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() && len(out) < maxAuditLines {
			var r auditLine
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: a line is not JSON: %q", path, sc.Text())
			}
			out = append(out, r)
		}
	}
	return out
}

// scanSecrets fails if b holds one of secrets.
func scanSecrets(t *testing.T, name string, b []byte, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds a secret (%d bytes)", name, len(s))
		}
	}
}

// tokenIDOf is server/audit.TokenID (the test may not import the server).
func tokenIDOf(token string) string { return api.TokenDigest(token)[:16] }
