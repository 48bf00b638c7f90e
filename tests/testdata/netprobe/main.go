// Command netprobe is what a hostile workspace runs in the network tests:
// each mode tries one way out and prints what it got (exit 0: it got
// through, 1: it did not, with the error on stderr).
//
//	netprobe http ADDR HOST [PATH]   GET http://ADDR/PATH with Host: HOST
//	netprobe raw ADDR TEXT           send TEXT (with \r\n escapes), print the answer
//	netprobe tls ADDR SNI            HTTPS GET / to ADDR, server name SNI
//	netprobe hello ADDR SNI          send a bare ClientHello naming SNI (even an address)
//	netprobe tcp ADDR                connect, print what the server says first
//	netprobe download ADDR SNI       HTTPS GET /slow, print bytes as they come, until cut
//	netprobe dns SERVER NAME         ask SERVER (host:port, UDP) for NAME's A record
//	netprobe udp ADDR                send a datagram, wait for an answer
//	netprobe icmp ADDR               ICMP echo (an unprivileged ping socket)
//	netprobe rawsock                 open a raw socket
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/patina-dev/patina/sidecar/egress"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "netprobe:", err)
		os.Exit(1)
	}
}

func dial(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	return c, err
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: netprobe MODE ...")
	}
	switch args[0] {
	case "http":
		path := "/"
		if len(args) > 3 {
			path = args[3]
		}
		return raw(args[1], "GET "+path+" HTTP/1.1\r\nHost: "+args[2]+"\r\nConnection: close\r\n\r\n")
	case "raw":
		return raw(args[1], strings.ReplaceAll(args[2], `\r\n`, "\r\n"))
	case "tls":
		c, err := dial(args[1])
		if err != nil {
			return err
		}
		tc := tls.Client(c, &tls.Config{ServerName: args[2], InsecureSkipVerify: true})
		fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", args[2])
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, b)
		return nil
	case "hello":
		c, err := dial(args[1])
		if err != nil {
			return err
		}
		if _, err := c.Write(egress.ClientHello(args[2])); err != nil {
			return err
		}
		b := make([]byte, 5)
		n, err := io.ReadFull(c, b)
		if n > 0 && b[0] == 0x16 {
			fmt.Println("a ServerHello")
			return nil
		}
		return fmt.Errorf("no ServerHello: %v", err)
	case "tcp":
		c, err := dial(args[1])
		if err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b := make([]byte, 200)
		n, err := c.Read(b)
		if n == 0 {
			return fmt.Errorf("connected, then nothing: %v", err)
		}
		fmt.Printf("%s\n", b[:n])
		return nil
	case "download":
		c, err := dial(args[1])
		if err != nil {
			return err
		}
		_ = c.SetDeadline(time.Time{})
		tc := tls.Client(c, &tls.Config{ServerName: args[2], InsecureSkipVerify: true})
		fmt.Fprintf(tc, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", args[2])
		buf := make([]byte, 32<<10)
		total := 0
		for {
			n, err := tc.Read(buf)
			total += n
			if n > 0 {
				fmt.Printf("%d\n", total)
			}
			if err != nil {
				return fmt.Errorf("cut after %d bytes: %v", total, err)
			}
		}
	case "dns":
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(args[2]), dns.TypeA)
		c := &dns.Client{Timeout: 3 * time.Second}
		r, _, err := c.Exchange(m, args[1])
		if err != nil {
			return err
		}
		var out []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				out = append(out, a.A.String())
			}
		}
		fmt.Printf("%s %s\n", dns.RcodeToString[r.Rcode], strings.Join(out, ","))
		if len(out) == 0 {
			return fmt.Errorf("no address")
		}
		return nil
	case "udp":
		c, err := net.Dial("udp", args[1])
		if err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 100)
		n, err := c.Read(b)
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", b[:n])
		return nil
	case "icmp":
		c, err := icmp.ListenPacket("udp4", "0.0.0.0")
		if err != nil {
			return err
		}
		defer c.Close()
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 1, Seq: 1, Data: []byte("ping")}}
		b, _ := msg.Marshal(nil)
		if _, err := c.WriteTo(b, &net.UDPAddr{IP: net.ParseIP(args[1])}); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		rb := make([]byte, 1500)
		n, _, err := c.ReadFrom(rb)
		if err != nil {
			return err
		}
		rm, err := icmp.ParseMessage(1, rb[:n])
		if err != nil || rm.Type != ipv4.ICMPTypeEchoReply {
			return fmt.Errorf("not an echo reply: %v %v", rm, err)
		}
		fmt.Println("echo reply")
		return nil
	case "rawsock":
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		syscall.Close(fd)
		fmt.Println("a raw socket")
		return nil
	}
	return fmt.Errorf("unknown mode %q", args[0])
}

func raw(addr, text string) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(c, text); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("%d %s\n", resp.StatusCode, b)
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
