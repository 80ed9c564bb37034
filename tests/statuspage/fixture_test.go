package statuspage

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// pageFile is the status page's source: the fixture server serves these
// bytes, as lockd serves them embedded.
var pageFile = filepath.Join("..", "..", "server", "httpapi", "status.html")

// pageCSP is the Content-Security-Policy lockd sends with the page
// (server/httpapi/server.go): the fixture server sends it too, so a page
// that loads anything else, or builds script from text, fails here.
const pageCSP = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"

// showWait bounds how long a change in the health document takes to show:
// a refresh period (3 s) and a request's timeout (4 s), with margin.
const showWait = 12 * time.Second

// fixtureAdmin is the admin token the fixture server accepts; fixtureTenant
// a token it knows as a tenant's (refused with forbidden).
const (
	fixtureAdmin  = "fixture-admin-token"
	fixtureTenant = "fixture-tenant-token"
	// fixtureNoCert stands for a browser without a client certificate
	// on a lockd with mutual TLS: refused before its token is read.
	fixtureNoCert = "fixture-no-certificate"
)

// fixtureServer serves the page and a health document it is given, or
// fails the health route with failStatus.
type fixtureServer struct {
	page []byte

	mu         sync.Mutex
	health     api.ClusterHealth
	failStatus int
}

func (f *fixtureServer) set(h api.ClusterHealth, failStatus int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health, f.failStatus = h, failStatus
}

func (f *fixtureServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case api.RouteStatusPage:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", pageCSP)
		_, _ = w.Write(f.page)
	case api.RouteStatusHealth:
		f.serveHealth(w, r)
	default:
		writeAPIError(w, http.StatusNotFound, api.CodeBadRequest, "no route "+r.URL.Path)
	}
}

func (f *fixtureServer) serveHealth(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	h, fail := f.health, f.failStatus
	f.mu.Unlock()
	switch auth := r.Header.Get("Authorization"); {
	case auth == "":
		writeAPIError(w, http.StatusUnauthorized, api.CodeUnauthorized, "this cluster requires an API token (Authorization: Bearer)")
	case auth == "Bearer "+fixtureNoCert:
		writeAPIError(w, http.StatusUnauthorized, api.CodeUnauthorized, "this lockd requires a client certificate its CA signed (mutual TLS: --tls-cert, --tls-key, --tls-ca)")
	case auth == "Bearer "+fixtureTenant:
		writeAPIError(w, http.StatusForbidden, api.CodeForbidden, "tenant web is not an admin: cluster operations need the admin role on /")
	case auth != "Bearer "+fixtureAdmin:
		writeAPIError(w, http.StatusUnauthorized, api.CodeUnauthorized, "unknown API token")
	case fail != 0:
		writeAPIError(w, fail, api.CodeUnavailable, "fixture: the health route is failing on purpose")
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h)
	}
}

func writeAPIError(w http.ResponseWriter, status int, code api.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: api.Errorf(code, "%s", msg)})
}

// startFixture serves the page from its source file.
func startFixture(t *testing.T) (*fixtureServer, string) {
	t.Helper()
	page, err := os.ReadFile(pageFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixtureServer{page: page}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + api.RouteStatusPage
}

// TestStatusPageFixtures loads the page in Chromium against fixture health
// documents and reads what an operator sees, from the DOM:
//   - without a token, and with a tenant's, the page says it needs an
//     admin token, and shows no cell; refused for want of a client
//     certificate, it says to install one;
//   - healthy: the cluster's badge says ok, "All healthy", each cell's
//     badge ok with its leader, replicas by zone and figures, the leader
//     changes, proxies, lockds and tenants' usage;
//   - degraded (a replica down, a move in flight, a slow disk, a proxy
//     unreachable): every problem's message is listed with its level,
//     the cells' badges say degraded, the down replica is marked down,
//     the slow fsync is flagged, the move shows its phase and progress,
//     the proxy its error; text from the API is shown as text, never as
//     markup;
//   - when the health route fails, a stale warning appears and the last
//     data stays.
func TestStatusPageFixtures(t *testing.T) {
	f, url := startFixture(t)
	now := time.Now()
	f.set(healthyFixture(now), 0)
	b := newBrowser(t, browserOptions{})
	b.navigate(url)

	checkNeedsAdmin(t, b)
	b.useToken(fixtureAdmin)
	b.waitFor("the cells", `document.querySelector('#cells tr[data-cell="payments"]')`, showWait)
	checkHealthy(t, b)
	b.checkFits()
	shots := shotDir(t)
	b.screenshot(filepath.Join(shots, "fixture-healthy.png"))

	f.set(degradedFixture(time.Now()), 0)
	b.waitFor("the degraded cluster", `document.querySelector('#level').dataset.level === "degraded"`, showWait)
	checkDegraded(t, b)
	b.checkFits()
	b.screenshot(filepath.Join(shots, "fixture-degraded.png"))

	f.set(degradedFixture(time.Now()), http.StatusServiceUnavailable)
	b.waitFor("the stale warning", `!document.querySelector('#stale').hidden`, showWait)
	checkStale(t, b)
	b.screenshot(filepath.Join(shots, "fixture-stale.png"))
	b.checkScriptErrors()
}

// checkNeedsAdmin: without a token the page asks for an admin's; with a
// tenant's it says that one is not an admin's; refused for want of a
// client certificate, it says so.
func checkNeedsAdmin(t *testing.T, b *browser) {
	t.Helper()
	b.waitFor("the unauthorized error", `!document.querySelector('#error').hidden`, showWait)
	wantContains(t, "error without a token", b.text("#error"), "needs an admin token", "unauthorized")
	if rows := b.texts("#cells tr[data-cell]"); len(rows) != 0 {
		t.Errorf("cells shown without a token: %q", rows)
	}
	b.useToken(fixtureTenant)
	b.waitFor("the forbidden error", `document.querySelector('#error').innerText.includes("forbidden")`, showWait)
	wantContains(t, "error with a tenant's token", b.text("#error"), "needs an admin token", "not an admin's")
	b.useToken(fixtureNoCert)
	b.waitFor("the client certificate error", `document.querySelector('#error').innerText.includes("mutual TLS")`, showWait)
	wantContains(t, "error without a client certificate", b.text("#error"), "requires a client certificate", "install one in this browser")
}
