// Command hostileagent replaces a workspace's agent from inside the
// workspace, as an attacker who is root in the container would: it kills
// the real agent, takes its socket, answers hello for the workspace (it
// knows the id) and then misbehaves on every call. The end-to-end tests
// plant it to show the sidecar stays responsive, bounded and unharmed.
//
//	hostileagent flood   every answer is an endless head line
//	hostileagent lie     every answer is a well-formed lie (forged ids, sizes, paths)
//	hostileagent hang    no call is ever answered
//	hostileagent frames  protocol violations: oversized frames
//	hostileagent fds     descriptors (of a file it made) sent to the sidecar
//	                     on every connection, before and after anything else
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostileagent flood|lie|hang|frames|fds")
		os.Exit(2)
	}
	mode := os.Args[1]
	ws := os.Getenv("PATINA_WORKSPACE")
	killAgents()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ {
		if ln, err = net.Listen("unix", "@patina-agent"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(nc, mode, ws)
	}
}

func serve(nc net.Conn, mode, ws string) {
	if mode == "fds" {
		sendFDs(nc)
		return
	}
	// Take the sidecar's pipes as the real agent does, so that what
	// follows reaches the sidecar the way an agent's bytes do.
	nc, err := wire.AcceptPipes(nc, 30*time.Second)
	if err != nil {
		return
	}
	if mode == "frames" {
		// A frame header announcing 4 GiB of data.
		hdr := make([]byte, 12)
		hdr[0] = 2
		binary.BigEndian.PutUint32(hdr[4:8], 1)
		binary.BigEndian.PutUint32(hdr[8:12], 0xffffffff)
		buf := make([]byte, 64<<10)
		for {
			if _, err := nc.Write(hdr); err != nil {
				return
			}
			for i := 0; i < 16; i++ {
				if _, err := nc.Write(buf); err != nil {
					return
				}
			}
		}
	}
	conn := mux.Server(nc, mux.Config{MaxStreams: 4096})
	ctx := context.Background()
	for {
		st, err := conn.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			if strings.Contains(string(st.Header()), `"m":"hello"`) {
				_, _ = st.WriteFinal([]byte(`{"r":{"workspace_id":"` + ws + `","protocol":` + fmt.Sprint(wire.ProtocolVersion) + `,"version":"hostile","pid":1}}` + "\n"))
				return
			}
			switch mode {
			case "flood":
				_, _ = st.Write([]byte(`{"r":{"notice":"`))
				chunk := []byte(strings.Repeat("A", 64<<10))
				for {
					if _, err := st.Write(chunk); err != nil {
						return
					}
				}
			case "lie":
				_, _ = st.WriteFinal([]byte(`{"r":{"command_id":"../../../etc/shadow","exit_code":0,"stdout":{"data_len":4,"size":-5},` +
					`"stderr":{"data_len":99999999999,"size":99999999999},"cwd":"relative/../../x","id":"/etc/passwd",` +
					`"state":"idle","name":"../../x","type":"file","size":-1}}` + "\n"))
			case "hang":
				<-st.Done()
			}
		}()
	}
}

// sendFDs offers the sidecar descriptors of a file made here with every
// byte it writes, until the connection closes (the sidecar reads nothing
// from a socket it handed pipes over, and reads a mux stream without
// taking descriptors).
func sendFDs(nc net.Conn) {
	defer nc.Close()
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return
	}
	f, err := os.Create("/tmp/patina-evil-fd")
	if err != nil {
		return
	}
	defer f.Close()
	rights := syscall.UnixRights(int(f.Fd()), int(f.Fd()))
	_ = uc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < 10000; i++ {
		if _, _, err := uc.WriteMsgUnix([]byte{1}, rights, nil); err != nil {
			return
		}
	}
}

// killAgents SIGKILLs every `patina agent serve` of the container but its
// init (pid 1, `agent pause --once -- agent serve ...` until it becomes
// bash): under runc the
// kernel ignores a SIGKILL sent to the init from inside anyway; gVisor
// (runsc 20221219) delivers it and the container stops, which ends this
// workspace, not the test of what a hostile agent does to the sidecar.
func killAgents() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "agent\x00serve") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
