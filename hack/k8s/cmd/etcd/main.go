// Command etcd is the etcd server at the version Kubernetes pins, built from
// the Go modules so the local control plane needs no downloaded binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
