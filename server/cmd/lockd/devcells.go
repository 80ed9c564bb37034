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

// createCells creates cells 3 and on through the directory (lockctl cell
// create and prefix assign do the same), once it answers. A cell already
// there (a restart on the same data) is left as it is.
func (d devCluster) createCells(ctx context.Context) error {
	eps := d.endpoints()[:d.replicas]
	post := func(route string, body any) error {
		b, _ := json.Marshal(body)
		var last error
		for attempt := 0; attempt < 300; attempt++ {
			for _, ep := range eps {
				resp, err := d.call(ctx, "POST", ep, route, b)
				if err != nil {
					last = err
					continue
				}
				var er api.ErrorResponse
				_ = json.NewDecoder(resp.Body).Decode(&er)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK:
					return nil
				case er.Error != nil && er.Error.Code == api.CodeConflict && strings.HasSuffix(er.Error.Message, " exists"):
					return nil // there already (a restart on the same data)
				case er.Error != nil && er.Error.Code != api.CodeUnavailable && er.Error.Code != api.CodeNotLeader:
					return er.Error
				}
				last = er.Error
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		return fmt.Errorf("%s: %v", route, last)
	}
	// Place the cells once every lockd has registered, so that placement
	// sees them all.
	for attempt := 0; attempt < 300 && d.cells >= 3; attempt++ {
		var dir api.DirectoryResponse
		if resp, err := d.call(ctx, "GET", eps[0], api.RouteDirectory, nil); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&dir)
			resp.Body.Close()
		}
		if len(dir.Lockds) >= d.lockds {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i := 3; i <= d.cells; i++ {
		name := fmt.Sprintf("cell%d", i)
		if err := post(api.RouteAdminCellCreate, api.CreateCellRequest{Name: name, Replicas: d.replicas}); err != nil {
			return err
		}
		if err := post(api.RouteAdminPrefixAssign, api.AssignPrefixRequest{Prefix: "/" + name, Cell: name}); err != nil {
			return err
		}
	}
	return nil
}
