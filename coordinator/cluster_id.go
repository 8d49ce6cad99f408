package coordinator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// clusterIDFile names the file in DataDir that records which cluster the
// data dir belongs to. It is written once the node first knows the cluster
// id and compared on every later start, so a data dir copied from another
// cluster (or a node pointed at the wrong voters) is refused instead of
// mixing two clusters' logs.
const clusterIDFile = "cluster-id"

// readClusterIDFile returns the recorded cluster id, or "" when none is
// recorded yet.
func readClusterIDFile(dataDir string) (string, error) {
	content, err := os.ReadFile(filepath.Join(dataDir, clusterIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("coordinator: read cluster id file: %w", err)
	}
	return strings.TrimSpace(string(content)), nil
}

// writeClusterIDFile records id durably: a temporary file, fsync, rename,
// fsync of the directory.
func writeClusterIDFile(dataDir, id string) error {
	path := filepath.Join(dataDir, clusterIDFile)
	temporary := path + ".tmp"
	file, err := os.OpenFile(temporary, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("coordinator: write cluster id file: %w", err)
	}
	_, err = file.WriteString(id + "\n")
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(temporary, path)
	}
	if err != nil {
		return fmt.Errorf("coordinator: write cluster id file: %w", err)
	}
	directory, err := os.Open(dataDir)
	if err != nil {
		return fmt.Errorf("coordinator: sync data dir: %w", err)
	}
	defer directory.Close()
	if err := directory.Sync(); err != nil {
		return fmt.Errorf("coordinator: sync data dir: %w", err)
	}
	return nil
}

// checkClusterID compares the replicated cluster id with the one recorded
// in the data dir, recording it on the first start.
func (c *Coordinator) checkClusterID() error {
	replicated := c.Metadata().ClusterID
	recorded, err := readClusterIDFile(c.config.DataDir)
	if err != nil {
		return err
	}
	switch recorded {
	case replicated:
		return nil
	case "":
		return writeClusterIDFile(c.config.DataDir, replicated)
	default:
		return fmt.Errorf("%w: data dir %s belongs to cluster %s, this cluster is %s",
			ErrClusterMismatch, c.config.DataDir, recorded, replicated)
	}
}
