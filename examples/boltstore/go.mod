module example.com/boltstore

go 1.26.0

require (
	github.com/crashmatrix/crashmatrix v0.0.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/hanwen/go-fuse/v2 v2.12.1 // indirect
	github.com/leanovate/gopter v0.2.11 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/crashmatrix/crashmatrix => ../..
