package main

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/protocol/wire"
)

// readyStatus is the HTTP status of /readyz, or 0 when it cannot be reached.
func (d *daemon) readyStatus() int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + d.http + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// apiVersionsServed reports whether a fresh connection gets an ApiVersions answer.
func apiVersionsServed(t *testing.T, address string) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	if resp := dialRaw(t, address).roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func openDescriptors(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("cannot read the daemon's descriptors: %v", err)
	}
	return len(entries)
}

// Issue 9 item 2, on a real process: sluiced ran out of descriptors, gnet's accept loop died,
// and the broker stayed up (and /readyz said ready) with no listener. Now the connections it
// cannot take are closed at once and it serves again as soon as descriptors free up.
func TestSluicedServesAgainAfterDescriptorExhaustion(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	apiVersionsServed(t, d.kafka)

	pid := d.cmd.Process.Pid
	limit := uint64(openDescriptors(t, pid) + 24)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Skipf("cannot lower the daemon's RLIMIT_NOFILE: %v", err)
	}
	// Hold connections until one is shed: closed by the broker without a byte.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	shed := false
	for i := 0; i < 200 && !shed; i++ {
		conn, err := net.Dial("tcp", d.kafka)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		held = append(held, conn)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(0)
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(appendFrame(req, 1)); err != nil {
			shed = true
			continue
		}
		var header [4]byte
		if _, err := conn.Read(header[:]); err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				t.Fatalf("connection %d neither served nor closed: %v", i, err)
			}
			shed = true
		}
	}
	if !shed {
		t.Fatalf("no connection was shed under a limit of %d descriptors", limit)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	eventually(t, 30*time.Second, "a new connection served after descriptors freed", func() bool {
		conn, err := net.DialTimeout("tcp", d.kafka, 5*time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(0)
		if _, err := conn.Write(appendFrame(req, 1)); err != nil {
			return false
		}
		var header [4]byte
		_, err = conn.Read(header[:])
		return err == nil
	})
	apiVersionsServed(t, d.kafka)
	if status := d.readyStatus(); status != http.StatusOK {
		t.Fatalf("/readyz = %d after recovering", status)
	}
	if got := d.metric(t, `sluice_net_connections_evicted_total{reason="fd_exhausted"}`); got == "" || got == "0" {
		t.Fatalf("shed connections not counted: %q", got)
	}
	if !strings.Contains(d.logs(), "out of file descriptors") {
		t.Fatalf("no log line about the exhaustion:\n%s", d.logs())
	}
}

// appendFrame is a size-prefixed request.
func appendFrame(req kmsg.Request, correlation int32) []byte {
	body := wire.EncodeRequest(correlation, "listener-test", req)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// listenerCopy returns a duplicate, in this process, of the daemon's listening socket on port
// (pidfd_getfd), so the test can break the very socket the daemon accepts on.
func listenerCopy(t *testing.T, pid, port int) int {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("cannot read the daemon's descriptors: %v", err)
	}
	for _, entry := range entries {
		target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + entry.Name())
		if err != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		number, _ := strconv.Atoi(entry.Name())
		copied, err := unix.PidfdGetfd(pidfd, number, 0)
		if err != nil {
			t.Skipf("pidfd_getfd: %v", err)
		}
		accepting, _ := unix.GetsockoptInt(copied, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		address, _ := unix.Getsockname(copied)
		if inet, ok := address.(*unix.SockaddrInet4); ok && accepting == 1 && inet.Port == port {
			return copied
		}
		unix.Close(copied)
	}
	t.Fatalf("no listening socket on port %d in the daemon", port)
	return -1
}

// A listener that breaks for good must take the broker out of service: /readyz stops saying
// ready and sluiced exits non-zero, instead of staying up and deaf.
func TestSluicedExitsWhenListenerFails(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	apiVersionsServed(t, d.kafka)
	_, portText, _ := net.SplitHostPort(d.kafka)
	port, _ := strconv.Atoi(portText)
	listener := listenerCopy(t, d.cmd.Process.Pid, port)
	defer unix.Close(listener)
	if err := unix.Shutdown(listener, unix.SHUT_RDWR); err != nil {
		t.Fatalf("shutdown the listener: %v", err)
	}
	select {
	case err := <-d.exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("sluiced exited with %v after its listener failed, want a non-zero status\n%s", err, d.logs())
		}
		d.exited <- err // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatalf("sluiced still running after its listener failed (readyz %d)\n%s", d.readyStatus(), d.logs())
	}
	if !strings.Contains(d.logs(), "can no longer accept connections") {
		t.Fatalf("no log line about the failed listener:\n%s", d.logs())
	}
}

// Issue 9 item 2: sluiced raises its soft RLIMIT_NOFILE to the hard limit at start, and warns
// when the limit leaves too little room (here: max connections above it).
func TestSluicedRaisesFileLimitAndWarnsWhenLow(t *testing.T) {
	var original unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &original); err != nil {
		t.Fatal(err)
	}
	if original.Max < 1024 {
		t.Skipf("hard limit %d too low to lower the soft one below it", original.Max)
	}
	// The daemon inherits this process's soft limit.
	lowered := unix.Rlimit{Cur: 512, Max: original.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "--max-connections", strconv.FormatUint(original.Max+1, 10))
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &original); err != nil {
		t.Fatal(err)
	}
	var inForce unix.Rlimit
	if err := unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &inForce); err != nil {
		t.Fatal(err)
	}
	if inForce.Cur != original.Max {
		t.Fatalf("daemon's soft limit %d, want the hard limit %d", inForce.Cur, original.Max)
	}
	eventually(t, 30*time.Second, "the low-limit warning", func() bool {
		return strings.Contains(d.logs(), "open file limit is low")
	})
	if !strings.Contains(d.logs(), "raised the open file limit") {
		t.Fatalf("no line about raising the limit:\n%s", d.logs())
	}
	apiVersionsServed(t, d.kafka)
}
