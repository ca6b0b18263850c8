// Command service-go is crashmatrix's reference service run through the
// service protocol (docs/service-protocol.md): adapters/serviceproc/refservice
// over stdin and stdout. With --own-stores it keeps its stores in SQLite
// files of its own, reports its calls to them and serves their read side,
// as a team's service does; otherwise every store is the harness's.
//
//	crashmatrix certify --service-cmd "go run ./examples/service-go --own-stores"
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
)

func main() {
	own := flag.Bool("own-stores", false, "keep the stores in SQLite files of the service's own, reporting each call to them")
	flag.Parse()
	if err := (refservice.Options{OwnStores: *own}).Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "service-go:", err)
		os.Exit(1)
	}
}
