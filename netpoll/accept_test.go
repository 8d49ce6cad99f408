package netpoll

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exhaustFileDescriptors lowers this process's soft RLIMIT_NOFILE to a little above the
// descriptors in use and opens /dev/null until the table is full, then frees `spare` slots.
// release closes what it opened and restores the limit. Tests using it must not run in
// parallel with others.
func exhaustFileDescriptors(t *testing.T, spare int) (release func()) {
	t.Helper()
	var original unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &original); err != nil {
		t.Fatal(err)
	}
	highest := 0
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, entry := range entries {
		var descriptor int
		if _, err := fmt.Sscan(entry.Name(), &descriptor); err == nil && descriptor > highest {
			highest = descriptor
		}
	}
	lowered := original
	lowered.Cur = uint64(highest + 64)
	if lowered.Cur > original.Cur {
		t.Skipf("soft limit %d already below what the test needs", original.Cur)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	var opened []int
	for {
		descriptor, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				t.Fatalf("open /dev/null: %v", err)
			}
			break
		}
		opened = append(opened, descriptor)
	}
	for range spare {
		_ = unix.Close(opened[len(opened)-1])
		opened = opened[:len(opened)-1]
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		for _, descriptor := range opened {
			_ = unix.Close(descriptor)
		}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &original); err != nil {
			t.Errorf("restore RLIMIT_NOFILE: %v", err)
		}
	}
	t.Cleanup(release)
	return release
}

// Issue 9 item 2: gnet's accept loop exited for good on EMFILE ("too many open files") and the
// engine shut down, so the broker stayed up with no listener. netpoll now sheds the connection it
// cannot take (closing it at once) and keeps accepting once descriptors are free again.
func TestAcceptSurvivesFileDescriptorExhaustion(t *testing.T) {
	server := startServer(t, testConfig(t), echoHandler())
	before := dial(t, server) // an established connection must survive the episode
	before.send([]byte("before"))
	before.mustReadFrame()

	release := exhaustFileDescriptors(t, 1)
	// The client's socket takes the last free descriptor; the server's accept meets EMFILE.
	shed, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatalf("dial while exhausted: %v", err)
	}
	_ = shed.SetReadDeadline(time.Now().Add(20 * time.Second))
	var buffer [1]byte
	_, err = shed.Read(buffer[:])
	var netErr net.Error
	if err == nil || (errors.As(err, &netErr) && netErr.Timeout()) {
		t.Fatalf("connection accepted past the descriptor limit was not shed: %v", err)
	}
	_ = shed.Close()
	release()

	after := dial(t, server)
	after.send([]byte("after"))
	if got := string(after.mustReadFrame()); got != "after" {
		t.Fatalf("echo after exhaustion = %q", got)
	}
	before.send([]byte("still"))
	if got := string(before.mustReadFrame()); got != "still" {
		t.Fatalf("echo on the earlier connection = %q", got)
	}
	if server.Failed() != nil {
		t.Fatalf("server reports failure: %v", server.Failed())
	}
	if shedCount := server.metrics.evicted(evictFileDescriptors).Get(); shedCount == 0 {
		t.Fatalf("no connection counted as shed for descriptor exhaustion")
	}
}

// Issue 9 item 2: a max-connections setting. A connection past the bound is closed at once;
// once one closes, a new one is served.
func TestMaxConnectionsClosesTheExcess(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxConnections = 2
	server := startServer(t, cfg, echoHandler())
	first, second := dial(t, server), dial(t, server)
	for _, client := range []*testClient{first, second} {
		client.send([]byte("in"))
		client.mustReadFrame()
	}
	third := dial(t, server)
	third.awaitClosed()
	if got := server.metrics.evicted(evictMaxConnections).Get(); got != 1 {
		t.Fatalf("evicted for max connections = %d, want 1", got)
	}
	_ = first.conn.Close()
	await(t, "the closed connection to be gone", func() bool { return server.openConnections.Load() == 1 })
	fourth := dial(t, server)
	fourth.send([]byte("room again"))
	if got := string(fourth.mustReadFrame()); got != "room again" {
		t.Fatalf("echo = %q", got)
	}
}

// A listener that breaks for good marks the server failed instead of leaving it up and deaf.
func TestBrokenListenerMarksServerFailed(t *testing.T) {
	server := startServer(t, testConfig(t), echoHandler())
	client := dial(t, server)
	checkEcho(t, client, "accepted") // out of the backlog before the listener breaks
	if server.Failed() != nil {
		t.Fatalf("fresh server failed: %v", server.Failed())
	}
	// A round trip first: a connection still in the accept backlog would be reset by the shutdown.
	client.send([]byte("accepted"))
	if got := string(client.mustReadFrame()); got != "accepted" {
		t.Fatalf("echo = %q", got)
	}
	// Shut the listening socket down underneath the accept loop (as a kernel or operator fault
	// would): accept now fails with EINVAL on every call.
	raw, err := server.acceptors[0].socket.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Control(func(descriptor uintptr) {
		if err := unix.Shutdown(int(descriptor), unix.SHUT_RDWR); err != nil {
			t.Errorf("shutdown listener: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-server.FailedSignal():
	case <-time.After(20 * time.Second):
		t.Fatal("server not marked failed after its listener broke")
	}
	if server.Failed() == nil {
		t.Fatal("FailedSignal closed but Failed is nil")
	}
	// Established connections are still served while the process decides what to do.
	client.send([]byte("established"))
	if got := string(client.mustReadFrame()); got != "established" {
		t.Fatalf("echo = %q", got)
	}
}
