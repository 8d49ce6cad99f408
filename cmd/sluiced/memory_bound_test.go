package main

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker"
)

func TestMemoryBoundFlags(t *testing.T) {
	opts, err := parseFlags([]string{"--max-connections", "100", "--max-buffered-input-bytes", "300000000",
		"--max-buffered-output-bytes", "100000000", "--connections-max-idle", "90s", "--request-receive-timeout", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := opts.broker
	if b.MaxConnections != 100 || b.MaxBufferedInputBytes != 300000000 || b.MaxBufferedOutputBytes != 100000000 ||
		b.ConnectionsMaxIdle != 90*time.Second || b.RequestReceiveTimeout != 5*time.Second {
		t.Fatalf("parsed %+v", b)
	}
	defaults, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := defaults.broker; d.MaxBufferedInputBytes != 512<<20 || d.MaxBufferedOutputBytes != 256<<20 ||
		d.ConnectionsMaxIdle != 10*time.Minute || d.RequestReceiveTimeout != time.Minute {
		t.Fatalf("defaults %+v", d)
	}
	for _, args := range [][]string{
		{"--max-buffered-input-bytes", "1000"}, // below one maximal request
		{"--max-connections", "-1"},
		{"--connections-max-idle", "-1s"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func peakRSS(t *testing.T, pid int) string {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))
		}
	}
	return "?"
}

// Issue 9 item 4 on a real process: connections each holding a large partial request are
// closed once their sum passes --max-buffered-input-bytes, and the broker keeps serving.
func TestSluicedBoundsPartialRequestsAcrossConnections(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--max-request-bytes", "16777216", "--max-buffered-input-bytes", "33554432")
	const attackers, partial = 8, 12 << 20
	var closed atomic.Int64
	var wg sync.WaitGroup
	var conns []net.Conn
	for range attackers {
		conn, err := net.Dial("tcp", d.kafka)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		wg.Go(func() {
			message := binary.BigEndian.AppendUint32(nil, 16<<20)
			message = append(message, make([]byte, partial)...)
			conn.SetDeadline(time.Now().Add(60 * time.Second)) // a guard against a hang
			conn.Write(message)
			var buffer [1]byte
			_, err := conn.Read(buffer[:])
			var netErr net.Error
			if err != nil && !(errors.As(err, &netErr) && netErr.Timeout()) && !errors.Is(err, net.ErrClosed) {
				closed.Add(1)
			}
		})
	}
	// 32 MiB holds two 12 MiB partial requests: at least 6 of 8 must be closed.
	eventually(t, 60*time.Second, "six connections closed", func() bool { return closed.Load() >= attackers-2 })
	for _, conn := range conns {
		conn.Close()
	}
	wg.Wait()
	if got := d.metric(t, `sluice_net_connections_evicted_total{reason="input_bytes"}`); got == "" || got == "0" {
		t.Fatalf("evictions not counted: %q", got)
	}
	apiVersionsServed(t, d.kafka)
	t.Logf("peak RSS of sluiced: %s", peakRSS(t, d.cmd.Process.Pid))
}

func TestMemoryLimitFromNetworkBounds(t *testing.T) {
	previous := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(previous)
	cfg := broker.DefaultConfig()
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	setMemoryLimit(slog.New(slog.DiscardHandler), cfg)
	want := cfg.MaxInFlightBytes + cfg.MaxBufferedInputBytes + cfg.MaxBufferedOutputBytes + memoryLimitHeadroom
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("memory limit %d, want %d", got, want)
	}
	debug.SetMemoryLimit(previous)
	t.Setenv("GOMEMLIMIT", "3GiB") // an operator's setting wins
	setMemoryLimit(slog.New(slog.DiscardHandler), cfg)
	if got := debug.SetMemoryLimit(-1); got != previous {
		t.Fatalf("memory limit changed to %d despite GOMEMLIMIT", got)
	}
}
