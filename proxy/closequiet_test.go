package proxy

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// warnings records the messages of a logger's warnings and errors.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

// TestCloseDuringRegistrationIsQuiet: a proxy closed while its
// registration is in flight (the directory not yet bootstrapped, as in
// the first second of `make run`) stops without reporting the cancelled
// call as a failure; the operator's log shows no "gave up" on a clean
// stop (a CI run of TestDevSaysReadyAndStopsProxiesFirst saw one).
func TestCloseDuringRegistrationIsQuiet(t *testing.T) {
	fc, err := fake.New(fake.Options{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	inFlight := make(chan struct{}, 1)
	fc.SetHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route != api.RouteAdminProxyRegister {
			return next()
		}
		select {
		case inFlight <- struct{}{}:
		default:
		}
		time.Sleep(300 * time.Millisecond) // long enough for Close to begin
		return fake.Fail(api.CodeUnavailable, "the directory is not bootstrapped yet")
	})
	w := &warnings{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, Config{Name: "p1", Listen: "127.0.0.1:0", Lockds: fc.Endpoints(), Logger: slog.New(w)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inFlight:
	case <-ctx.Done():
		_ = p.Close()
		t.Fatal("the proxy never tried to register")
	}
	before := w.count()
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if after := w.msgs[before:]; len(after) > 0 {
		t.Fatalf("a proxy closed mid-registration logged %q", after)
	}
}
