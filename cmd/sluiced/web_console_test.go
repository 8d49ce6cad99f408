package main

import (
	"net"
	"testing"
)

func TestConsoleDialsItsOwnListener(t *testing.T) {
	for listen, want := range map[string]string{"0.0.0.0:9092": "127.0.0.1:9092", "[::]:9092": "[::1]:9092", "10.1.2.3:9092": "10.1.2.3:9092"} {
		addr, err := net.ResolveTCPAddr("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := dialable(addr); got != want {
			t.Errorf("dialable(%s) = %s, want %s", listen, got, want)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "0.0.0.0": false, "10.1.2.3": false, "": false} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v", host, got)
		}
	}
}
