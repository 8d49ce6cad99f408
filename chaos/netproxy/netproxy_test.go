package netproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as a dialing child process: with NETPROXY_DIAL set it connects there, says
// "hi\n" and holds the connection until stdin closes.
func TestMain(m *testing.M) {
	if address := os.Getenv("NETPROXY_DIAL"); address != "" {
		conn, err := net.Dial("tcp", address)
		if err != nil {
			os.Exit(3)
		}
		conn.Write([]byte("hi\n"))
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echoServer echoes every connection and reports what it received on got.
func echoServer(t *testing.T) (string, chan []byte) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	got := make(chan []byte, 100)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					n, err := conn.Read(buf)
					if n > 0 {
						got <- append([]byte(nil), buf[:n]...)
						conn.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return listener.Addr().String(), got
}

func dialAs(t *testing.T, client int32, address string) net.Conn {
	t.Helper()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: ClientIP(client)}, Timeout: 5 * time.Second}
	conn, err := dialer.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newNetwork(t *testing.T, identify Identify) *Network {
	n := New(identify)
	t.Cleanup(n.Close)
	return n
}

// expectNothing asserts that nothing can be read from conn for a while: the one place where a
// test must wait for something not to happen.
func expectNothing(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v through a blocked link", buf[:n], err)
	}
	conn.SetReadDeadline(time.Time{})
}

func readExactly(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != want {
		t.Fatalf("read %q, %v; want %q", buf, err, want)
	}
	conn.SetReadDeadline(time.Time{})
}

func TestBlockedLinkHoldsBytesAndDeliversThemOnHeal(t *testing.T) {
	target, got := echoServer(t)
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int { return nil }))
	proxy, err := n.Listen(NodePeer(1), Kafka, target)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialAs(t, 4, proxy.Addr())
	readBack := func(s string) { conn.Write([]byte(s)); readExactly(t, conn, s) }
	readBack("before")
	<-got

	var seen atomic.Value
	n.SetPolicy(func(from, to Peer, service Service) Effect {
		if from.Role == Client {
			seen.Store(from)
		}
		return Effect{Blocked: from == ClientPeer(4) && to == NodePeer(1) && service == Kafka}
	})
	conn.Write([]byte("during"))
	expectNothing(t, conn)
	select {
	case b := <-got:
		t.Fatalf("server got %q through a cut link", b)
	default:
	}
	if seen.Load() != ClientPeer(4) {
		t.Fatalf("policy saw client %v, want c4", seen)
	}
	n.SetPolicy(nil)
	readExactly(t, conn, "during")
}

func TestOneWayCutDeliversRequestsButNotAnswers(t *testing.T) {
	target, got := echoServer(t)
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int { return nil }))
	proxy, err := n.Listen(NodePeer(2), Raft, target)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialAs(t, 1, proxy.Addr())
	n.SetPolicy(func(from, to Peer, service Service) Effect {
		return Effect{Blocked: from == NodePeer(2)} // answers from node 2 are cut
	})
	conn.Write([]byte("ping"))
	if b := <-got; string(b) != "ping" {
		t.Fatalf("server got %q", b)
	}
	expectNothing(t, conn)
	n.SetPolicy(nil)
	readExactly(t, conn, "ping")
}

func TestDropClosesMatchingConnections(t *testing.T) {
	target, _ := echoServer(t)
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int { return nil }))
	proxy, err := n.Listen(NodePeer(1), Kafka, target)
	if err != nil {
		t.Fatal(err)
	}
	kept, dropped := dialAs(t, 1, proxy.Addr()), dialAs(t, 2, proxy.Addr())
	for _, c := range []net.Conn{kept, dropped} {
		c.Write([]byte("x"))
		readExactly(t, c, "x")
	}
	if count := n.Drop(func(from, _ Peer, _ Service) bool { return from == ClientPeer(2) }); count != 1 {
		t.Fatalf("dropped %d connections, want 1", count)
	}
	dropped.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := dropped.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dropped connection read: %v, want a reset", err)
	}
	kept.Write([]byte("y"))
	readExactly(t, kept, "y")
}

func TestSenderClosingWhileBlockedTearsTheLinkDown(t *testing.T) {
	target, _ := echoServer(t)
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int { return nil }))
	proxy, err := n.Listen(NodePeer(1), Kafka, target)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialAs(t, 3, proxy.Addr())
	conn.Write([]byte("x"))
	readExactly(t, conn, "x")
	n.SetPolicy(func(Peer, Peer, Service) Effect { return Effect{Blocked: true} })
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(n.Links()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("links still open: %v", n.Links())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDelayAndBandwidthSlowDelivery(t *testing.T) {
	target, _ := echoServer(t)
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int { return nil }))
	proxy, err := n.Listen(NodePeer(1), Kafka, target)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialAs(t, 1, proxy.Addr())
	n.SetPolicy(func(from, to Peer, _ Service) Effect {
		return Effect{Delay: 100 * time.Millisecond, BytesPerSecond: 1 << 20}
	})
	start := time.Now()
	conn.Write([]byte("slow"))
	readExactly(t, conn, "slow")
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Fatalf("round trip through two 100 ms delays took %v", elapsed)
	}
}

// TestIdentifyByProcessNamesTheDialingProcess starts a child process that dials the proxy and
// checks that the policy sees it as the node whose pid it has.
func TestIdentifyByProcessNamesTheDialingProcess(t *testing.T) {
	target, got := echoServer(t)
	var childPID atomic.Int64
	n := newNetwork(t, IdentifyByProcess(func() map[int32]int {
		return map[int32]int{1: os.Getpid() + 1_000_000, 7: int(childPID.Load())}
	}))
	proxy, err := n.Listen(NodePeer(2), Raft, target)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan Peer, 100)
	n.SetPolicy(func(from, to Peer, service Service) Effect {
		if to == NodePeer(2) {
			select {
			case seen <- from:
			default:
			}
		}
		return Effect{}
	})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "NETPROXY_DIAL="+proxy.Addr())
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childPID.Store(int64(child.Process.Pid))
	defer func() { stdin.Close(); child.Wait() }()
	if b := <-got; string(b) != "hi\n" {
		t.Fatalf("server got %q", b)
	}
	if from := <-seen; from != NodePeer(7) {
		t.Fatalf("connection attributed to %v, want n7", from)
	}
	// A connection from this process (no node, no client address) is unknown.
	conn, err := net.Dial("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("me\n"))
	bufio.NewReader(conn).ReadString('\n')
	for from := range seen {
		if from == (Peer{}) {
			break
		}
		if from != NodePeer(7) {
			t.Fatalf("own connection attributed to %v", from)
		}
	}
}

func TestParseProcAddr(t *testing.T) {
	a, err := parseProcAddr("0100007F:1F90")
	if err != nil || a.String() != "127.0.0.1:8080" {
		t.Fatalf("got %v, %v", a, err)
	}
	a, err = parseProcAddr("0000000000000000FFFF00000100007F:0050")
	if err != nil || !a.IP.Equal(net.IPv4(127, 0, 0, 1)) || a.Port != 80 {
		t.Fatalf("got %v, %v", a, err)
	}
}
