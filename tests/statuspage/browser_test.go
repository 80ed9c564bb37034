// Package statuspage tests lockd's status page (server/httpapi/status.html)
// in a real headless Chromium driven with chromedp: against fixture
// health documents (fixture_test.go: what an operator must see, the stale
// warning, the token errors, escaping) and on a real cluster with auth and
// mutual TLS (cluster_test.go), healthy and then degraded, whose
// screenshots are docs/status-page.png and docs/status-page-degraded.png.
package statuspage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/lockservice/lockd/tests/cluster"
)

// Bounds of the browser's steps.
const (
	// browserBudget bounds everything one browser does in a test.
	browserBudget = 3 * time.Minute
	// pollEvery is how often a wait looks at the page again.
	pollEvery = 100 * time.Millisecond
	// pageWidth is the window's width: the screenshots are this wide.
	pageWidth, pageHeight = 1400, 1000
)

// browser is one headless Chromium with one tab, and the script errors
// the page threw.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// browserOptions are the few things a test changes in its Chromium: its
// profile directory (the TLS test seeds it) and its environment (HOME,
// for the NSS database holding the client certificate).
type browserOptions struct {
	profile string
	env     []string
}

// newBrowser starts Chromium for t (stopped when t ends).
func newBrowser(t *testing.T, o browserOptions) *browser {
	t.Helper()
	bin := cluster.ChromiumPath(t)
	if o.profile == "" {
		o.profile = filepath.Join(t.TempDir(), "profile")
	}
	// The flags keep a sandboxed, offline machine's Chromium from
	// reaching out (and failing) at start.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(o.profile), chromedp.WindowSize(pageWidth, pageHeight))
	if len(o.env) > 0 {
		opts = append(opts, chromedp.Env(o.env...))
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, browserBudget)
	t.Cleanup(func() { cancel(); bcancel(); acancel() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, b.onEvent); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return b
}

func (b *browser) onEvent(ev any) {
	if e, ok := ev.(*runtime.EventExceptionThrown); ok {
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		b.mu.Lock()
		b.errors = append(b.errors, msg)
		b.mu.Unlock()
	}
}

// scriptErrors fails t if the page threw.
func (b *browser) checkScriptErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Errorf("script errors on the page: %v", b.errors)
	}
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("chromium: %s: %v", what, err)
	}
}

// navigate opens url and waits until the page's script has run once.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS(`#cells`)))
}

// useToken types token into the page's form, as an operator does, and
// submits it (Enter).
func (b *browser) useToken(token string) {
	b.t.Helper()
	eval[string](b, `document.getElementById("token").value = ""`)
	b.do("type the token", chromedp.SendKeys(chromedp.ID("token"), token+"\r"))
}

// eval runs a JavaScript expression and decodes its (JSON) value into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("chromium: evaluate %.80q: %v", expr, err)
	}
	return v
}

// waitFor waits, at most within, until the JavaScript expression cond is
// true; on timeout it fails t with what and the page's text.
func (b *browser) waitFor(what, cond string, within time.Duration) {
	b.t.Helper()
	if err := b.poll(cond, within); err != nil {
		b.t.Fatalf("the page did not show %s within %v (%v); it reads:\n%s", what, within, err, b.text("body"))
	}
}

// poll is waitFor without failing: nil once cond is true.
func (b *browser) poll(cond string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%s is still false", cond)
			}
			return err
		}
		time.Sleep(pollEvery)
	}
}

// text is the rendered text (innerText) of the first element matching
// the CSS selector, "" if none.
func (b *browser) text(sel string) string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText`, q))
}

// texts are the rendered texts of every element matching sel.
func (b *browser) texts(sel string) []string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((e) => e.innerText)`, q))
}

// visible says whether the first element matching sel is shown (not
// hidden, and laid out).
func (b *browser) visible(sel string) bool {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && !e.closest("[hidden]") && e.getClientRects().length > 0; })()`, q))
}

// checkFits fails t if the page is wider than the window (pageWidth):
// an operator would have to scroll sideways, and the screenshot would be
// wider than asked.
func (b *browser) checkFits() {
	b.t.Helper()
	width := eval[int](b, `document.documentElement.scrollWidth`)
	if width > pageWidth {
		wide := eval[[]string](b, `[...document.querySelectorAll("main > section, main > div, main table")].filter((e) => e.getBoundingClientRect().right > innerWidth).map((e) => e.tagName + "#" + e.id)`)
		b.t.Errorf("the page is %d px wide in a %d px window: too wide are %v", width, pageWidth, wide)
	}
}

// screenshot saves a full-page PNG to path.
func (b *browser) screenshot(path string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100 /* 100: PNG */))
	if err != nil {
		b.t.Fatalf("chromium: screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// wantContains fails t unless got contains every one of wants.
func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, got)
		}
	}
}

// shotDir is where a test keeps its screenshots: $LOCKD_STATUSPAGE_SHOTS
// if set (to look at them), else a temporary directory.
func shotDir(t *testing.T) string {
	if d := os.Getenv("LOCKD_STATUSPAGE_SHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}
