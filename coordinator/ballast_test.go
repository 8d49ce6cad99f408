package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/smalldisk"
)

// TestBallastGivesWayToRaftWrites: a write to the Raft store that fails for lack of space deletes
// the ballast and is tried again once; other failures, and failures once the ballast is gone,
// are returned as they are; the ballast is laid again once there is room.
func TestBallastGivesWayToRaftWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.ballast")
	const size = 1 << 20
	b := newBallast(path, size, slog.New(slog.DiscardHandler))
	if info, err := os.Stat(path); err != nil || info.Size() != size {
		t.Fatalf("ballast not laid: %v %v", info, err)
	}
	s := &ballastedStore{ballast: b}

	// The disk is full until the ballast is gone.
	attempts := 0
	full := func() error {
		attempts++
		if _, err := os.Stat(path); err == nil {
			return &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
		}
		return nil
	}
	if err := s.write(full); err != nil || attempts != 2 {
		t.Fatalf("write on a full disk: %v after %d attempts; want success on the second", err, attempts)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the ballast is still there: %v", err)
	}

	// No ballast left: a full disk fails the write, after one attempt.
	attempts = 0
	stillFull := func() error { attempts++; return syscall.ENOSPC }
	if err := s.write(stillFull); !errors.Is(err, syscall.ENOSPC) || attempts != 1 {
		t.Fatalf("write on a full disk without ballast: %v after %d attempts", err, attempts)
	}

	// Once it is time to look and there is room, the ballast is laid again; other errors do not
	// touch it.
	b.mu.Lock()
	b.mu.lastCheck = time.Now().Add(-ballastCheckInterval)
	b.mu.Unlock()
	attempts = 0
	broken := func() error { attempts++; return syscall.EIO }
	if err := s.write(broken); !errors.Is(err, syscall.EIO) || attempts != 1 {
		t.Fatalf("write failing with EIO: %v after %d attempts", err, attempts)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != size {
		t.Fatalf("ballast not laid again: %v %v", info, err)
	}
}

// TestRaftStoreWritableOnFullDisk: on a real filesystem that fills up, a node with a ballast
// keeps committing changes (its Raft log takes them), and one without cannot.
func TestRaftStoreWritableOnFullDisk(t *testing.T) {
	open := func(ballast int64) *Coordinator {
		disk := smalldisk.Mount(t, 32<<20)
		config := testConfig(filepath.Join(disk, "node"))
		config.BallastBytes = ballast
		config.ApplyTimeout = 2 * time.Second
		c := openTest(t, config)
		if err := c.RegisterBroker(testContext(t), Broker{NodeID: 1, Host: "127.0.0.1", Port: 9091}); err != nil {
			t.Fatal(err)
		}
		smalldisk.Fill(t, filepath.Join(disk, "filler"))
		return c
	}
	// Enough changes to need new pages of the Raft log, some 600 KB.
	createMany := func(c *Coordinator) (int, error) {
		for i := range 2000 {
			name := fmt.Sprintf("after-%d-%s", i, strings.Repeat("x", 200))
			if _, err := c.CreateTopic(testContext(t), name, 1, 1, nil, false); err != nil {
				return i, err
			}
		}
		return 2000, nil
	}
	if n, err := createMany(open(0)); err == nil {
		t.Fatalf("the node without a ballast committed %d topics on a full disk: the test proves nothing", n)
	}
	if n, err := createMany(open(4 << 20)); err != nil {
		t.Fatalf("topic %d on a full disk, with a ballast: %v", n, err)
	}
}
