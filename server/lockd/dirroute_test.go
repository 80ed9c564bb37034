package lockd

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/dirfsm"
)

// Every directory command a lockd without a directory replica forwards
// has a route on the directory replicas: a cell led from such a lockd
// must be able to record its membership changes (a member step once went
// to "/v1/admin/none" and was refused as bad_request).
func TestDirectoryRouteForEveryForwardedOp(t *testing.T) {
	for _, tc := range []struct {
		cmd   dirfsm.Command
		route string
	}{
		{dirfsm.Command{Op: dirfsm.OpRegister, Lockd: &api.LockdInfo{ID: 7}}, api.RouteAdminRegister},
		{dirfsm.Command{Op: dirfsm.OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "c"}}, api.RouteAdminCellCreate},
		{dirfsm.Command{Op: dirfsm.OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/p", Cell: "c"}}, api.RouteAdminPrefixAssign},
		{dirfsm.Command{Op: dirfsm.OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/p"}}, api.RouteAdminMigrate},
		{dirfsm.Command{Op: dirfsm.OpMember, Member: &api.MemberRequest{Cell: "c", Action: api.MemberRemove, Lockd: 6}}, api.RouteAdminMemberRecord},
		{dirfsm.Command{Op: dirfsm.OpRestore, Restore: &api.RestoreCellRequest{Cell: "c"}}, api.RouteAdminRestore},
		{dirfsm.Command{Op: dirfsm.OpTenant, Tenant: &dirfsm.TenantChange{}}, api.RouteAdminTenantCommit},
	} {
		route, body := directoryRoute(&tc.cmd)
		if route != tc.route || body == nil {
			t.Errorf("%s forwarded to %q with body %v, want %q", tc.cmd.Op, route, body, tc.route)
		}
	}
}
