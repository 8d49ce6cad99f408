package broker

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// TestLostMetadataDoesNotAdoptOldPartitions loses meta/ (the Raft store) under a broker that holds
// a topic with records, then re-creates the topic: the new topic must start empty, and the old
// partition directory must still exist, moved aside with its records.
func TestLostMetadataDoesNotAdoptOldPartitions(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig(t, t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := startBrokerWith(t, cfg)
	c := dial(t, b)
	c.createTopic("reborn", 1, nil)
	c.mustProduce("reborn", 0, recordBatch(batchTime, "old-1", "old-2", "old-3"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "meta")); err != nil {
		t.Fatal(err)
	}

	cfg.Metrics = metrics.NewSet()
	b = startBrokerWith(t, cfg)
	c = dial(t, b)
	c.createTopic("reborn", 1, nil)
	if got := c.readAll("reborn", 0); len(got) != 0 {
		t.Fatalf("the re-created topic serves %d records of the lost one: %+v", len(got), got)
	}
	if offset := c.mustProduce("reborn", 0, recordBatch(batchTime, "new-1")); offset != 0 {
		t.Fatalf("first record of the re-created topic at offset %d", offset)
	}
	assertRecords(t, c.readAll("reborn", 0), "new-1")

	aside, _ := filepath.Glob(filepath.Join(cfg.DataDir, "topics", "reborn-0"+orphanedSuffix+"*"))
	if len(aside) != 1 {
		t.Fatalf("old partition directory moved aside: %v", aside)
	}
	data, err := os.ReadFile(filepath.Join(aside[0], "00000000000000000000.log"))
	if err != nil || !bytes.Contains(data, []byte("old-3")) {
		t.Fatalf("the moved-aside log lost its records (err %v)", err)
	}
	if !strings.Contains(logs.String(), "moved aside") || !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("moving the directory aside was not logged as an error:\n%s", logs.String())
	}
}

// TestPreparePartitionDir covers each state a partition directory can be found in.
func TestPreparePartitionDir(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	id := [16]byte{1, 2, 3}
	other := [16]byte{9}
	now := time.Unix(1_800_000_000, 0)
	prepare := func(t *testing.T, setup func(dir string)) (dir string, aside []string) {
		t.Helper()
		root := t.TempDir()
		dir = filepath.Join(root, "topic-0")
		setup(dir)
		if err := preparePartitionDir(dir, id, now, logger); err != nil {
			t.Fatal(err)
		}
		if stored, err := readTopicID(dir); err != nil || stored != id {
			t.Fatalf("after prepare: id %x, err %v", stored, err)
		}
		aside, _ = filepath.Glob(dir + orphanedSuffix + "*")
		return dir, aside
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("absent", func(t *testing.T) {
		if _, aside := prepare(t, func(string) {}); len(aside) != 0 {
			t.Fatalf("moved aside: %v", aside)
		}
	})
	t.Run("empty", func(t *testing.T) {
		_, aside := prepare(t, func(dir string) { write(filepath.Join(dir, topicIDTmpFile), "") })
		if len(aside) != 0 {
			t.Fatalf("an empty directory was moved aside: %v", aside)
		}
	})
	t.Run("same id", func(t *testing.T) {
		dir, aside := prepare(t, func(dir string) {
			if err := writeTopicID(dir, id); err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(dir, "data.log"), "mine")
		})
		if len(aside) != 0 {
			t.Fatalf("own directory moved aside: %v", aside)
		}
		if _, err := os.Stat(filepath.Join(dir, "data.log")); err != nil {
			t.Fatal(err)
		}
	})
	foreign := func(name string, setup func(dir string)) {
		t.Run(name, func(t *testing.T) {
			dir, aside := prepare(t, setup)
			if len(aside) != 1 || !strings.HasSuffix(aside[0], "20270115T080000.000000000Z") {
				t.Fatalf("moved aside: %v", aside)
			}
			if content, err := os.ReadFile(filepath.Join(aside[0], "data.log")); err != nil || string(content) != "theirs" {
				t.Fatalf("moved-aside data: %q, %v", content, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "data.log")); !os.IsNotExist(err) {
				t.Fatalf("the fresh directory holds the old data: %v", err)
			}
		})
	}
	foreign("other id", func(dir string) {
		if err := writeTopicID(dir, other); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(dir, "data.log"), "theirs")
	})
	foreign("no id", func(dir string) { write(filepath.Join(dir, "data.log"), "theirs") })
	foreign("garbled id", func(dir string) {
		write(filepath.Join(dir, topicIDFile), "not an id\n")
		write(filepath.Join(dir, "data.log"), "theirs")
	})
}

// TestStartRemovesWhatAnEarlierRunLeftToDelete: a partition directory moved aside for removal by a
// run that stopped before it was removed is removed by the next start; other directories stay.
func TestStartRemovesWhatAnEarlierRunLeftToDelete(t *testing.T) {
	dataDir := t.TempDir()
	topics := filepath.Join(dataDir, "topics")
	leftover := filepath.Join(topics, "old-0.deleted-20261203T060000.000000000Z")
	orphan := filepath.Join(topics, "old-1.orphaned-20261203T060000.000000000Z")
	for _, dir := range []string{leftover, orphan} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), make([]byte, 3<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := startBrokerWith(t, testConfig(t, dataDir))
	await(t, "the leftover to be removed", func() bool {
		_, err := os.Stat(leftover)
		return os.IsNotExist(err) && b.registry.trash.Pending() == 0
	})
	if _, err := os.Stat(filepath.Join(orphan, "00000000000000000000.log")); err != nil {
		t.Fatalf("an orphaned directory was touched: %v", err)
	}
}
