// Package dirfsm is the directory group's replicated state machine: the
// lockds and proxies registered, the cells and their replicas, which cell
// serves each top-level prefix under which epoch, moves (migrations) in
// flight, restore plans and tenants. Like a cell's state machine
// (server/fsm) it is pure and deterministic: commands (Command, one per
// log entry) are applied in order, every refusal is a Result with an
// api.Code and changes nothing. server/dirgroup runs it on dragonboat;
// the routing view the SDK, proxy and lockctl use is package directory,
// built from State.Response.
package dirfsm
