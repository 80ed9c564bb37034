package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
)

// Bounds of the dev cluster's readiness wait: rounds over every lockd,
// devReadyPause apart (a minute in all).
const (
	devReadyRounds = 300
	devReadyPause  = 200 * time.Millisecond
)

// prefixes are the prefixes the dev cluster promises: the bootstrap
// cells' and /cellN of each cell created through the directory.
func (d devCluster) prefixes() []string {
	var out []string
	for _, spec := range d.cellSpecs() {
		out = append(out, spec[strings.LastIndex(spec, ",")+1:])
	}
	for i := 3; i <= d.cells; i++ {
		out = append(out, fmt.Sprintf("/cell%d", i))
	}
	return out
}

// waitReady returns once every promised prefix is served (a read of its
// root is answered by its cell's leader) and every proxy answers its
// health check, or the bound passes.
func (d devCluster) waitReady(ctx context.Context) error {
	for _, p := range d.prefixes() {
		if err := d.untilOK(ctx, "serving "+p, d.endpoints(), func(ep string) (bool, error) { return d.serves(ctx, ep, p) }); err != nil {
			return err
		}
	}
	for i := 1; i <= d.proxies; i++ {
		addr := d.proxyAddr(i)
		if err := d.untilOK(ctx, "proxy "+addr, []string{addr}, func(ep string) (bool, error) {
			resp, err := d.call(ctx, "GET", ep, api.RouteHealth, nil)
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// untilOK tries check on each endpoint in turn, in bounded rounds.
func (d devCluster) untilOK(ctx context.Context, what string, eps []string, check func(ep string) (bool, error)) error {
	for round := 0; round < devReadyRounds; round++ {
		for _, ep := range eps {
			ok, err := check(ep)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(devReadyPause):
		}
	}
	return fmt.Errorf("%s: not ready after %v", what, devReadyRounds*devReadyPause)
}

// serves reports whether ep's answer to a read of prefix's root comes from
// the cell that serves it: the node, or no such node. Elections,
// placements still starting and views of the directory still behind
// answer otherwise, for a while.
func (d devCluster) serves(ctx context.Context, ep, prefix string) (bool, error) {
	b, _ := json.Marshal(api.ReadRequest{Path: prefix})
	resp, err := d.call(ctx, "POST", ep, api.RouteGet, b)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return true, nil
	}
	var er api.ErrorResponse
	_ = json.NewDecoder(resp.Body).Decode(&er)
	return er.Error != nil && er.Error.Code == api.CodeNoNode, nil
}
