package broker

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMetadataDirOutsideTopics: the metadata may live anywhere but among the partition logs, whose
// folder the broker treats as all partitions (one it does not know is moved aside).
func TestMetadataDirOutsideTopics(t *testing.T) {
	data := t.TempDir()
	for _, c := range []struct {
		metadataDir string
		refused     bool
	}{
		{"", false},
		{filepath.Join(data, "meta"), false},
		{filepath.Join(t.TempDir(), "raft"), false},
		{filepath.Join(data, "topics-meta"), false},
		{filepath.Join(data, "topics"), true},
		{filepath.Join(data, "topics", "meta"), true},
		{filepath.Join(data, "topics", "x", "..", "meta") + "/", true},
	} {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.MetadataDir = data, c.metadataDir
		err := cfg.Validate()
		if refused := err != nil && strings.Contains(err.Error(), "where the partition logs live"); refused != c.refused {
			t.Errorf("metadata dir %q: Validate() = %v, want refused %v", c.metadataDir, err, c.refused)
		}
	}
}
