package localcluster

import (
	"net"
	"strconv"
	"testing"
)

// The chaos suite opens its fault proxies on ephemeral ports between New and StartAll. A node
// port released before that could be handed to a proxy, and the node then failed to bind it (CI,
// TestChaosShortFixedSeed: node 1's Kafka port was its own Raft proxy's).
func TestNewHoldsThePortsUntilStartAll(t *testing.T) {
	c := unstarted(t)
	for _, n := range c.Nodes {
		for _, address := range []string{n.Kafka, n.Raft, n.HTTP} {
			if l, err := net.Listen("tcp", address); err == nil {
				l.Close()
				t.Fatalf("node %d port %s could be bound by another listener before StartAll", n.ID, address)
			}
		}
	}
	c.Close()
	for _, n := range c.Nodes {
		l, err := net.Listen("tcp", n.Kafka)
		if err != nil {
			t.Fatalf("node %d port %s still held after Close: %v", n.ID, n.Kafka, err)
		}
		l.Close()
	}
}

// A port from the ephemeral range, released for a node to bind, could be taken by any outgoing
// connection first (CI: "bind: address already in use" for a node's Kafka port under load).
func TestPortsComeFromBelowTheEphemeralRange(t *testing.T) {
	low, high := clusterPorts()
	if high == low {
		t.Skip("the ephemeral range leaves no room below it on this machine")
	}
	for _, n := range unstarted(t).Nodes {
		for _, address := range []string{n.Kafka, n.Raft, n.HTTP} {
			_, portText, err := net.SplitHostPort(address)
			if err != nil {
				t.Fatal(err)
			}
			if port, _ := strconv.Atoi(portText); port < low || port >= high {
				t.Errorf("node %d port %d outside [%d, %d), below the ephemeral range", n.ID, port, low, high)
			}
		}
	}
}

// unstarted is a three-node cluster with its ports chosen and nothing started, closed when the
// test ends.
func unstarted(t *testing.T) *Cluster {
	t.Helper()
	c, err := New(Config{Binary: "unused", Dir: t.TempDir(), Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
