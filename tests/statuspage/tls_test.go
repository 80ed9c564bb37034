package statuspage

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// toolTimeout bounds one certutil, pk12util or openssl run.
const toolTimeout = 30 * time.Second

// The tools that put a client certificate where Chromium finds it (NSS):
// Debian's libnss3-tools and openssl.
var tlsTools = []string{"certutil", "pk12util", "openssl"}

// haveTLSTools says whether the browser can be given a client
// certificate here; without the tools the end-to-end test runs over
// plain HTTP, unless LOCKD_REQUIRE_CHROMIUM=1 (CI), where it fails.
func haveTLSTools(t *testing.T) bool {
	t.Helper()
	for _, tool := range tlsTools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("LOCKD_REQUIRE_CHROMIUM") == "1" {
				t.Fatalf("%s not found (apt-get install libnss3-tools openssl) and LOCKD_REQUIRE_CHROMIUM=1: the status page must be tested over mutual TLS", tool)
			}
			t.Logf("%s not found (apt-get install libnss3-tools openssl): the page is tested over plain HTTP only", tool)
			return false
		}
	}
	return true
}

// clientCertBrowser prepares a Chromium that presents client's
// certificate to the API over mutual TLS, as an operator's browser does:
// an NSS database in a HOME of its own holding the certificate and its key
// (imported from PKCS#12) and trusting the cluster's CA, and a profile
// whose preferences select that certificate for each origin without
// asking (AUTO_SELECT_CERTIFICATE: a headless browser cannot show the
// chooser, and would wait for it).
func clientCertBrowser(t *testing.T, client tlsutil.Files, origins []string) browserOptions {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	nss := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(nss, 0o700); err != nil {
		t.Fatal(err)
	}
	db := "sql:" + nss
	p12 := filepath.Join(dir, "client.p12")
	runTool(t, "certutil", "-N", "-d", db, "--empty-password")
	runTool(t, "certutil", "-A", "-d", db, "-n", "lockd development CA", "-t", "C,,", "-i", client.CA)
	runTool(t, "openssl", "pkcs12", "-export", "-in", client.Cert, "-inkey", client.Key, "-out", p12,
		"-name", "lockd client", "-passout", "pass:statuspage")
	runTool(t, "pk12util", "-i", p12, "-d", db, "-W", "statuspage")

	profile := filepath.Join(dir, "profile")
	if err := os.MkdirAll(filepath.Join(profile, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	exceptions := map[string]any{}
	for _, o := range origins {
		exceptions[o+",*"] = map[string]any{"setting": map[string]any{"filters": []any{map[string]any{}}}}
	}
	prefs, err := json.Marshal(map[string]any{"profile": map[string]any{"content_settings": map[string]any{
		"exceptions": map[string]any{"auto_select_certificate": exceptions}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profile, "Default", "Preferences"), prefs, 0o600); err != nil {
		t.Fatal(err)
	}
	return browserOptions{profile: profile, env: []string{"HOME=" + home}}
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
