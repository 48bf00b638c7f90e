package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// netHarness is a sidecar whose DNS upstream is the lab's, and workspaces
// with netprobe in them.
type netHarness struct {
	*Harness
	lab *NetLab
}

func startNet(t *testing.T) *netHarness {
	t.Helper()
	RequireDocker(t)
	lab := StartNetLab(t)
	if os.Getenv("PATINA_E2E_BIN") != "" { // a build from before the boundary: no --dns
		return &netHarness{Harness: Start(t), lab: lab}
	}
	h := StartWith(t, t.TempDir(), "e2e-net", nil, []string{"--dns", lab.DNS})
	if !strings.Contains(h.Logs(), "network boundary up") {
		t.Fatalf("the sidecar did not set its network boundary up:\n%s", lastLines(h.Logs(), 30))
	}
	return &netHarness{Harness: h, lab: lab}
}

// workspace creates a workspace with a policy and netprobe in it.
func (n *netHarness) workspace(name string, p *client.NetworkPolicy) client.Workspace {
	n.t.Helper()
	ws := n.CreateWorkspace(client.CreateWorkspaceRequest{Name: name, Network: p})
	n.upload(name, testBinary(n.t, "netprobe"), "netprobe")
	return ws
}

// probe runs netprobe in a workspace and returns whether it got through,
// and what it printed.
func (n *netHarness) probe(ws string, args ...string) (bool, string) {
	n.t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	t0 := time.Now()
	res := n.ExecReq(ws, "default", client.ExecRequest{Command: "/workspace/netprobe " + strings.Join(q, " "), TimeoutMS: 30000})
	if d := time.Since(t0); res.ExitCode != 0 && d > 8*time.Second {
		n.t.Errorf("netprobe %v took %s to be refused: refusals must come at once, never a hang", args, d)
	}
	return res.ExitCode == 0, strings.TrimSpace(res.Stdout + res.Stderr)
}

// reach requires that the probe gets through and prints want.
func (n *netHarness) reach(ws, want string, args ...string) {
	n.t.Helper()
	ok, out := n.probe(ws, args...)
	if !ok || !strings.Contains(out, want) {
		n.t.Errorf("%s: netprobe %v: exp to get through with %q, got %v %q", ws, args, want, ok, out)
	}
}

// refused requires that the probe does not get through; with want, that
// its output says so.
func (n *netHarness) refused(ws, want string, args ...string) {
	n.t.Helper()
	ok, out := n.probe(ws, args...)
	if ok || (want != "" && !strings.Contains(out, want)) {
		n.t.Errorf("%s: netprobe %v: exp refused (%q), got %v %q", ws, args, want, ok, out)
	}
	for _, role := range []string{"internet", "lan", "metadata", "host", "6.6.6.6", "echo ping", "lan-database"} {
		if strings.Contains(out, role) && ok {
			n.t.Errorf("%s: netprobe %v reached %q", ws, args, role)
		}
	}
}

// logged waits for the workspace's log to record a refusal naming want.
func (n *netHarness) logged(ws, want string) {
	n.t.Helper()
	var last []client.LogEntry
	WaitFor(n.t, "a network-refused event naming "+want, 10*time.Second, func() bool {
		last, _ = n.Client.Log(context.Background(), ws)
		for _, e := range last {
			if e.Kind == "network-refused" && strings.Contains(e.Message, want) {
				return true
			}
		}
		return false
	})
}

// gateway is the workspace's default gateway (the sidecar's network).
func (n *netHarness) gateway(ws string) string {
	n.t.Helper()
	out := n.Out(ws, "default", `awk '$2=="00000000" {printf "%d.%d.%d.%d\n", "0x" substr($3,7,2), "0x" substr($3,5,2), "0x" substr($3,3,2), "0x" substr($3,1,2)}' /proc/net/route`)
	return strings.TrimSpace(out)
}

// Mode open, the default: the internet answers; the host (every address,
// the gateway, Docker's other bridges), the LAN, the metadata address,
// another workspace, UDP, ICMP and a DNS server of the workspace's choice
// do not; names resolve, but never to an address the workspace may not
// reach.
func TestNetworkOpen(t *testing.T) {
	n := startNet(t)
	ws := n.workspace("open", nil)
	if ws.Network.Mode != client.NetworkOpen {
		t.Fatalf("exp the default policy open, got %+v", ws.Network)
	}
	other := n.workspace("other", nil)
	otherIP := strings.Fields(n.Out(other.Name, "default", "hostname -I"))[0]
	n.Out(other.Name, "default", "setsid /workspace/netprobe http 127.0.0.1:1 x >/dev/null 2>&1; true")
	gw := n.gateway("open")

	n.reach("open", "200 internet", "http", "203.0.113.10:8080", "anything")
	n.reach("open", "200 internet", "tls", "203.0.113.10:8443", "anything.example")
	n.reach("open", "SSH-2.0-internet", "tcp", "203.0.113.10:2222")
	if out := n.Exec("open", "default", "getent hosts allowed.test").Stdout; !strings.Contains(out, "203.0.113.10") {
		t.Errorf("open: names do not resolve: %q", out)
	}
	n.refused("open", "403 patina", "http", "10.251.0.10:8080", "x")
	n.refused("open", "403 patina", "http", "169.254.169.254:80", "x")
	n.refused("open", "", "tcp", "10.251.0.10:5432")
	// The host, by every address it has and by the gateway; the sidecar's
	// proxy port is the gateway's only open one, and it refuses itself.
	for _, a := range append(HostAddrs(t), gw) {
		n.refused("open", "", "http", fmt.Sprintf("%s:%d", a, n.lab.HostPort), "x")
	}
	for _, port := range []int{22, 53, 2375, 7070} {
		n.refused("open", "", "tcp", fmt.Sprintf("%s:%d", gw, port))
	}
	n.refused("open", "", "http", otherIP+":8080", "x")
	// IPv6 and IPv4 inside IPv6: the workspace has no IPv6, and an
	// IPv4-mapped address is IPv4 to the kernel, checked the same way.
	n.refused("open", "", "tcp", "[2001:db8:7::10]:8443")
	n.refused("open", "", "http", "[::ffff:10.251.0.10]:8080", "x")
	n.refused("open", "", "http", "[::ffff:169.254.169.254]:80", "x")
	// No UDP (but DNS) and no ICMP leave; no raw sockets.
	n.refused("open", "", "udp", "203.0.113.10:9999")
	n.refused("open", "", "icmp", "203.0.113.10")
	n.refused("open", "operation not permitted", "rawsock")
	// Its own DNS server: the query is answered by the sidecar's policy
	// (which does not know the name), not by that server (6.6.6.6).
	n.refused("open", "NXDOMAIN", "dns", "203.0.113.10:53", "hijack.test")
	n.reach("open", "203.0.113.10", "dns", "203.0.113.10:53", "allowed.test")
	// Names that lead to forbidden addresses resolve to nothing.
	for _, name := range []string{"evil.test", "meta.test", "hostname.test"} {
		if res := n.Exec("open", "default", "getent hosts "+name); res.ExitCode == 0 {
			t.Errorf("open: %s resolved: %q", name, res.Stdout)
		}
	}
	n.logged("open", "169.254.169.254:80")
}

// Mode allow: only the names and addresses listed, names matched by the
// TLS server name or the HTTP Host and resolved by the sidecar; every
// trick a hostile workspace tries is refused at once.
func TestNetworkAllow(t *testing.T) {
	n := startNet(t)
	n.workspace("allow", &client.NetworkPolicy{Mode: client.NetworkAllow, Allow: []string{
		"allowed.test", "*.wild.test", "evil.test", "meta.test", "10.251.0.10:5432", "v6only.test", "v6evil.test",
	}})
	n.reach("allow", "200 internet", "tls", "203.0.113.10:8443", "allowed.test")
	n.reach("allow", "200 internet", "tls", "203.0.113.10:8443", "b.a.wild.test")
	n.reach("allow", "200 internet", "http", "203.0.113.10:8080", "allowed.test")
	n.reach("allow", "lan-database", "tcp", "10.251.0.10:5432")
	// The proxy resolves the name itself: v6only.test's IPv4 address
	// (where the workspace connects) leads nowhere, its IPv6 one to the
	// server.
	n.reach("allow", "200 internet6", "tls", "203.0.113.9:8443", "v6only.test")
	if out := n.Out("allow", "default", "getent hosts allowed.test"); !strings.Contains(out, "203.0.113.10") {
		t.Errorf("allow: an allowed name does not resolve: %q", out)
	}

	n.refused("allow", "", "tls", "203.0.113.10:8443", "other.test")
	n.logged("allow", "other.test:8443")
	n.refused("allow", "", "tls", "203.0.113.10:8443", "wild.test")
	n.refused("allow", "403 patina", "http", "203.0.113.10:8080", "other.test")
	n.refused("allow", "", "tcp", "203.0.113.10:2222")
	n.refused("allow", "", "tcp", "10.251.0.10:8080")
	// An allowed name pointed at a forbidden address.
	n.refused("allow", "private", "http", "203.0.113.10:8080", "evil.test")
	n.refused("allow", "", "tls", "203.0.113.10:8443", "evil.test")
	n.refused("allow", "", "tls", "203.0.113.10:8443", "meta.test")
	n.refused("allow", "", "tls", "203.0.113.10:8443", "v6evil.test")
	n.logged("allow", "evil.test")
	// Names not listed do not resolve; a DNS server of its own is not
	// reached; /etc/hosts changes nothing.
	if res := n.Exec("allow", "default", "getent hosts other.test"); res.ExitCode == 0 {
		t.Errorf("allow: a name not listed resolved: %q", res.Stdout)
	}
	n.logged("allow", "other.test (DNS)")
	n.refused("allow", "NXDOMAIN", "dns", "203.0.113.10:53", "hijack.test")
	n.Out("allow", "default", "echo '203.0.113.10 other.test' >> /etc/hosts")
	n.refused("allow", "", "tls", "other.test:8443", "other.test")
	// Tricks: an address as server name, a proxy request, CONNECT,
	// HTTP/2 without TLS, a second host on a kept-alive connection.
	n.refused("allow", "", "hello", "203.0.113.10:8443", "203.0.113.10")
	n.refused("allow", "403 patina", "raw", "203.0.113.10:8080", `GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n`)
	n.refused("allow", "403 patina", "raw", "203.0.113.10:8080", `CONNECT other.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n`)
	n.refused("allow", "403 patina", "raw", "203.0.113.10:8080", `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`)
	n.refused("allow", "", "raw", "203.0.113.10:8080", `GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n`+
		`GET / HTTP/1.1\r\nHost: other.test\r\n\r\n`)
	n.refused("allow", "", "udp", "203.0.113.10:9999")
	n.refused("allow", "", "icmp", "203.0.113.10")
}

// A policy changed while downloads run: the one no longer allowed is cut
// at once, the other goes on; an agent's narrowing cannot widen.
func TestNetworkPolicyChange(t *testing.T) {
	n := startNet(t)
	n.workspace("dl", &client.NetworkPolicy{Mode: client.NetworkAllow, Allow: []string{"allowed.test", "a.wild.test"}})
	for _, name := range []string{"allowed.test", "a.wild.test"} {
		n.Out("dl", "default", fmt.Sprintf("setsid /workspace/netprobe download 203.0.113.10:8443 %s >/tmp/%s.log 2>&1 &", name, name))
	}
	size := func(name string) int {
		out := n.Out("dl", "default", "tail -n 1 /tmp/"+name+".log")
		var v int
		fmt.Sscan(out, &v)
		return v
	}
	WaitFor(t, "both downloads to run", 15*time.Second, func() bool { return size("allowed.test") > 0 && size("a.wild.test") > 0 })
	ctx := context.Background()
	ws, err := n.Client.SetNetwork(ctx, "dl", client.NetworkPolicy{Mode: client.NetworkAllow, Allow: []string{"a.wild.test"}}, false)
	if err != nil || len(ws.Network.Allow) != 1 {
		t.Fatalf("set the network: %+v %v", ws.Network, err)
	}
	WaitFor(t, "the download no longer allowed to be cut", 5*time.Second, func() bool {
		return strings.Contains(n.Out("dl", "default", "cat /tmp/allowed.test.log"), "cut after")
	})
	before := size("a.wild.test")
	WaitFor(t, "the allowed download to go on", 10*time.Second, func() bool { return size("a.wild.test") > before+64<<10 })
	// Narrowing only: taking away is fine, adding is refused.
	if _, err := n.Client.SetNetwork(ctx, "dl", client.NetworkPolicy{Mode: client.NetworkAllow, Allow: []string{"a.wild.test", "other.test"}}, true); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("a narrowing that widens: exp 400, got %v", err)
	}
	if _, err := n.Client.SetNetwork(ctx, "dl", client.NetworkPolicy{Mode: client.NetworkOpen}, true); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("a narrowing to open: exp 400, got %v", err)
	}
	if ws, err := n.Client.SetNetwork(ctx, "dl", client.NetworkPolicy{Mode: client.NetworkNone}, true); err != nil || ws.Network.Mode != client.NetworkNone {
		t.Fatalf("a narrowing to none: %+v %v", ws.Network, err)
	}
	WaitFor(t, "the last download to be cut", 5*time.Second, func() bool {
		return strings.Contains(n.Out("dl", "default", "cat /tmp/a.wild.test.log"), "cut after")
	})
	if out := n.Out("dl", "default", "ls /sys/class/net | tr '\\n' ' '"); strings.Contains(out, "eth") {
		t.Errorf("network none: the workspace still has an interface: %q", out)
	}
	// And back: a running workspace gets the network again.
	if _, err := n.Client.SetNetwork(ctx, "dl", client.NetworkPolicy{Mode: client.NetworkOpen}, false); err != nil {
		t.Fatal(err)
	}
	n.reach("dl", "200 internet", "http", "203.0.113.10:8080", "x")
	n.refused("dl", "403 patina", "http", "10.251.0.10:8080", "x")
}

// kill -9 of the sidecar: nothing opens while it is down (connections are
// refused at once), and after a restart the policy holds.
func TestNetworkSidecarKill9(t *testing.T) {
	n := startNet(t)
	ws := n.workspace("k9", &client.NetworkPolicy{Mode: client.NetworkAllow, Allow: []string{"allowed.test"}})
	n.reach("k9", "200 internet", "http", "203.0.113.10:8080", "allowed.test")
	n.Kill9()
	dc := dockerClient(t)
	for _, cmd := range [][]string{
		{"/workspace/netprobe", "http", "203.0.113.10:8080", "allowed.test"},
		{"/workspace/netprobe", "http", "10.251.0.10:8080", "x"},
		{"/workspace/netprobe", "tcp", "203.0.113.10:2222"},
		{"/workspace/netprobe", "udp", "203.0.113.10:9999"},
		{"/workspace/netprobe", "dns", "203.0.113.10:53", "allowed.test"},
	} {
		t0 := time.Now()
		code, out := dockerExec(t, dc, ws.ContainerID, cmd)
		if code == 0 || time.Since(t0) > 8*time.Second {
			t.Errorf("with the sidecar down, %v: exp refused at once, got exit %d after %s: %q", cmd, code, time.Since(t0), out)
		}
	}
	n.Launch()
	WaitFor(t, "the workspace to be adopted", 60*time.Second, func() bool {
		w, err := n.Client.GetWorkspace(context.Background(), "k9")
		return err == nil && w.Status == client.StatusRunning
	})
	n.reach("k9", "200 internet", "http", "203.0.113.10:8080", "allowed.test")
	n.refused("k9", "403 patina", "http", "203.0.113.10:8080", "other.test")
	n.refused("k9", "", "tcp", "10.251.0.10:5432")
}
