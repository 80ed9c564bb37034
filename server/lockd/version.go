package lockd

// Version is the lockd build, linked in by the Makefile with
// -ldflags "-X github.com/lockservice/lockd/server/lockd.Version=$(git describe)".
// /v1/status reports it, so an operator can tell which build each replica
// runs during a rolling upgrade.
var Version = "dev"
