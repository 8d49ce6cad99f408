package broker

// A partition directory belongs to one topic id. The name alone (<topic>-<index>) cannot tell a
// topic from an earlier topic of the same name: when the metadata store is lost (meta/ removed or
// replaced), a topic re-created under an old name would otherwise adopt the old directory and serve
// its records at offsets the new topic hands out again. So each partition directory holds a small
// file naming its topic id, written before the log is created and checked before the log is opened.
// A directory with another id, or with data but no id, is never adopted and never deleted: it is
// renamed to <dir>.orphaned-<UTC time> and logged as an error for an operator to inspect.
//
// topic-id file: 32 lowercase hex digits (the 16-byte topic id) and a newline, written to
// topic-id.tmp, fsynced, renamed into place, and the directory fsynced.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

const (
	topicIDFile    = "topic-id"
	topicIDTmpFile = "topic-id.tmp"
	// orphanedSuffix starts the name a foreign partition directory is moved to.
	orphanedSuffix = ".orphaned-"
)

// preparePartitionDir makes dir the directory of a partition of topic id, ready for segment.Open:
// it creates dir and its topic-id file when dir does not exist (or is empty), keeps it when its
// topic-id file names id, and otherwise moves it aside and starts a fresh one.
func preparePartitionDir(dir string, id [16]byte, now time.Time, logger *slog.Logger) error {
	stored, err := readTopicID(dir)
	switch {
	case err == nil && stored == id:
		return nil
	case err == nil:
		return orphanPartitionDir(dir, id, fmt.Sprintf("it holds topic id %x", stored), now, logger)
	case errors.Is(err, errTopicIDUnreadable):
		return orphanPartitionDir(dir, id, err.Error(), now, logger)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// No topic-id file: either no directory, an empty one (a crash right after mkdir), or the
	// directory of a log written before the id existed or whose id file was removed.
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("broker: list partition dir %s: %w", dir, err)
	default:
		for _, entry := range entries {
			if entry.Name() != topicIDTmpFile {
				return orphanPartitionDir(dir, id, "it holds files but no topic-id file", now, logger)
			}
		}
	}
	return writeTopicID(dir, id)
}

var errTopicIDUnreadable = errors.New("broker: topic-id file unreadable")

// readTopicID reads dir's topic-id file. A missing file (or directory) wraps fs.ErrNotExist, a
// file that is not a topic id wraps errTopicIDUnreadable; anything else is an I/O error.
func readTopicID(dir string) ([16]byte, error) {
	var id [16]byte
	raw, err := os.ReadFile(filepath.Join(dir, topicIDFile))
	if err != nil {
		return id, fmt.Errorf("broker: read topic id of %s: %w", dir, err)
	}
	text := bytes.TrimSpace(raw)
	if len(text) != 2*len(id) {
		return id, fmt.Errorf("%w: %s holds %d bytes", errTopicIDUnreadable, filepath.Join(dir, topicIDFile), len(raw))
	}
	if _, err := hex.Decode(id[:], text); err != nil {
		return id, fmt.Errorf("%w: %s: %w", errTopicIDUnreadable, filepath.Join(dir, topicIDFile), err)
	}
	return id, nil
}

// writeTopicID creates dir if needed and stores id in it durably.
func writeTopicID(dir string, id [16]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("broker: create partition dir %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, topicIDTmpFile)
	file, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("broker: write topic id of %s: %w", dir, err)
	}
	_, err = file.WriteString(hex.EncodeToString(id[:]) + "\n")
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, topicIDFile))
	}
	if err == nil {
		err = syncDirectory(dir)
	}
	if err == nil {
		// The partition directory's own entry must be durable too, or a crash could lose the
		// directory with the id file inside it while the metadata store keeps the topic.
		err = syncDirectory(filepath.Dir(dir))
	}
	if err != nil {
		return fmt.Errorf("broker: write topic id of %s: %w", dir, err)
	}
	return nil
}

// orphanPartitionDir moves a directory that does not belong to topic id out of the way, keeping
// every byte, then starts the partition's directory afresh.
func orphanPartitionDir(dir string, id [16]byte, reason string, now time.Time, logger *slog.Logger) error {
	aside := dir + orphanedSuffix + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("broker: move foreign partition dir %s aside: %w", dir, err)
	}
	if err := syncDirectory(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("broker: move foreign partition dir %s aside: %w", dir, err)
	}
	logger.Error("partition directory does not belong to this topic: moved aside, not served and not deleted; inspect it and remove it by hand",
		"dir", dir, "reason", reason, "topic_id", fmt.Sprintf("%x", id), "moved_to", aside)
	return writeTopicID(dir, id)
}

func syncDirectory(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}
