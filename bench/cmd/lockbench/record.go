package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/lockservice/lockd/bench/report"
)

// runRecord is the run as lockbench writes it: the report's run with the
// system it measured beside it, so a compare of an etcd run with a lockd
// run says which is which. Its JSON is the report's, plus "target" and
// "server_version" (a reader of report.Run alone ignores them).
type runRecord struct {
	*report.Run
	Target        string `json:"target"`
	ServerVersion string `json:"server_version,omitempty"`
}

// versionTimeout bounds the one status call that asks the servers' version.
const versionTimeout = 10 * time.Second

// newRunRecord records r's target and the servers' version (best effort: a
// version the servers do not tell is left out, with a line on stderr).
func newRunRecord(ctx context.Context, r *report.Run, name string, t target, stderr io.Writer) *runRecord {
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	v, err := t.version(vctx)
	if err != nil {
		fmt.Fprintf(stderr, "target %s: version unknown: %v\n", name, err)
	} else if v != "" {
		fmt.Fprintf(stderr, "target %s %s\n", name, v)
	}
	return &runRecord{Run: r, Target: name, ServerVersion: v}
}

// JSON writes the record as indented JSON.
func (r *runRecord) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
