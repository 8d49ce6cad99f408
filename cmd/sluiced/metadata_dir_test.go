package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetadataDirOfItsOwn runs sluiced with --metadata-dir apart from --data-dir: the Raft log and
// the cluster id live there and nowhere under the data dir, which holds only the partition logs; a
// restart with the same two folders serves the topic and its records as before.
func TestMetadataDirOfItsOwn(t *testing.T) {
	dataDir, metaDir := t.TempDir(), filepath.Join(t.TempDir(), "metadata")
	d := startDaemon(t, dataDir, "--metadata-dir", metaDir)
	client := newClient(t, d.kafka, kgo.DisableIdempotentWrite())
	createTopic(t, client, "apart", 1)
	for i := 0; i < 100; i++ {
		if err := client.ProduceSync(context.Background(), &kgo.Record{Topic: "apart", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
	d.stop()

	for _, name := range []string{"raft.db", "cluster-id"} {
		if _, err := os.Stat(filepath.Join(metaDir, name)); err != nil {
			t.Errorf("metadata dir: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "meta")); !os.IsNotExist(err) {
		t.Errorf("the data dir has a meta folder (stat: %v), want none with --metadata-dir", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "topics", "apart-0")); err != nil {
		t.Errorf("data dir: %v", err)
	}

	restarted := startDaemon(t, dataDir, "--metadata-dir", metaDir)
	if got := consumeAll(t, restarted.kafka, "apart", 100); len(got) != 100 {
		t.Fatalf("after restart %d records, want 100", len(got))
	}
}
