// Command portserver listens on a TCP port and answers every connection
// with a line: a server inside a workspace, for the tests of what other
// workspaces can reach.
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", ":"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, "hello from the workspace")
		c.Close()
	}
}
