package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

func TestNotSent(t *testing.T) {
	// A port nobody listens on: the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = New(addr, "t", nil).Health(context.Background())
	if err == nil || !NotSent(err) {
		t.Fatalf("exp a refused dial to count as not sent, got %v", err)
	}
	for _, e := range []error{
		errors.New("boom"),
		&APIError{Status: 500, Code: CodeInternal, Message: "x"},
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded),
	} {
		if NotSent(e) {
			t.Fatalf("%v must not count as not sent", e)
		}
	}
}
