package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// TestClientFollowsHintAndRetries checks the client against fake replicas:
// a follower answering not_leader with a hint, a leader that is first
// unavailable, and a dead endpoint.
func TestClientFollowsHintAndRetries(t *testing.T) {
	var leaderCalls atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if leaderCalls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: &api.Error{Code: api.CodeUnavailable}})
			return
		}
		if r.URL.Path == api.RouteDelete {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: &api.Error{Code: api.CodeNoNode, Message: "gone"}})
			return
		}
		_ = json.NewEncoder(w).Encode(api.GetResponse{Exists: true, Index: 7})
	}))
	defer leader.Close()
	leaderAddr := strings.TrimPrefix(leader.URL, "http://")
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: &api.Error{Code: api.CodeNotLeader, Leader: leaderAddr}})
	}))
	defer follower.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()

	c := NewClient(deadAddr, strings.TrimPrefix(follower.URL, "http://"))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp api.GetResponse
	if err := c.Do(ctx, api.RouteGet, api.ReadRequest{Path: "/demo/x"}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Index != 7 {
		t.Fatalf("reply %+v", resp)
	}
	err := c.Do(ctx, api.RouteDelete, api.DeleteRequest{Path: "/demo/x"}, nil)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNoNode {
		t.Fatalf("delete: %v, want *api.Error no_node", err)
	}
	attempts, retries := c.Stats()
	t.Logf("attempts %d, retries %d", attempts, retries)

	// A call that can never succeed ends with its context.
	c2 := NewClient(deadAddr)
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := c2.Do(short, api.RouteGet, api.ReadRequest{Path: "/demo/x"}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dead endpoint: %v, want deadline exceeded", err)
	}
}

// TestLifecycle exercises the process controls on a 3-replica cluster.
func TestLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := Start(t, Options{Replicas: 3})
	cl := c.NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	put := func(v string) {
		t.Helper()
		if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: "/demo/k", Value: []byte(v)}, nil); err != nil {
			t.Fatalf("put %s: %v", v, err)
		}
	}
	put("1")
	leader, err := c.LeaderOf("demo")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PID(leader)
	checkTimerSlack(t, pid, time.Millisecond) // lockd serve's default, on every thread
	px, err := c.StartProxy("p1")
	if err != nil {
		t.Fatal(err)
	}
	checkTimerSlack(t, px.PID(), time.Millisecond) // lockproxy's too
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Running(leader) || c.PID(leader) != 0 {
		t.Fatalf("replica %d (pid %d) still runs", leader, pid)
	}
	next, err := c.WaitLeader("demo", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("killed replica %d still leads", leader)
	}
	put("2")
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	follower := 1
	for follower == next || follower == leader {
		follower++
	}
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	if !c.Paused(follower) {
		t.Fatal("not paused")
	}
	put("3") // two of three replicas still form a quorum
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(next); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader("demo", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var got api.GetResponse
	if err := cl.Do(ctx, api.RouteGet, api.ReadRequest{Path: "/demo/k"}, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Node.Value) != "3" {
		t.Fatalf("value %q, want 3", got.Node.Value)
	}
	if !strings.Contains(c.LogTail(next, 5), "exited") {
		t.Errorf("log of stopped replica %d does not record its exit:\n%s", next, c.LogTail(next, 5))
	}
}

// checkTimerSlack fails t unless every thread of process pid has timer
// slack want (lockd serve and lockproxy set it: internal/timerslack).
func checkTimerSlack(t *testing.T, pid int, want time.Duration) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of pid %d: %v (%d found)", pid, err, len(tasks))
	}
	read := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + filepath.Base(task) + "/timerslack_ns")
		switch {
		case errors.Is(err, fs.ErrPermission):
			t.Logf("timer slack of pid %d not checked: reading another process's needs CAP_SYS_NICE", pid)
			return
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
			continue // the thread ended since the listing
		case err != nil:
			t.Fatalf("pid %d thread %s: %v", pid, filepath.Base(task), err)
		}
		read++
		if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(want.Nanoseconds(), 10) {
			t.Fatalf("pid %d thread %s: timer slack %s ns, want %d", pid, filepath.Base(task), got, want.Nanoseconds())
		}
	}
	if read == 0 {
		t.Fatalf("pid %d: no thread's timer slack could be read", pid)
	}
}
