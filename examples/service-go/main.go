// Command service-go is crashmatrix's reference service run through the
// service protocol (docs/service-protocol.md): adapters/serviceproc/refservice
// over stdin and stdout.
//
//	crashmatrix certify --service-cmd "go run ./examples/service-go"
package main

import (
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
)

func main() {
	if err := refservice.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "service-go:", err)
		os.Exit(1)
	}
}
