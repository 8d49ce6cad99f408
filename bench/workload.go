package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Workload is one benchmark, as a workload file describes it (YAML, or JSON, which YAML reads too).
// Field names are the file's keys. Rates and counts are totals over the whole run, whatever the
// number of agents the producers and consumers are spread over.
type Workload struct {
	Name       string `yaml:"name" json:"name"`
	Topics     int    `yaml:"topics" json:"topics"`
	Partitions int32  `yaml:"partitions" json:"partitions"` // per topic
	// ReplicationFactor of the created topics; -1 (the default) takes the broker's default. With
	// more than one, run against a cluster (--brokers lists several nodes).
	ReplicationFactor int16 `yaml:"replication_factor" json:"replication_factor"`
	// MinInsyncReplicas, when above 0, sets the topics' min.insync.replicas.
	MinInsyncReplicas int `yaml:"min_insync_replicas" json:"min_insync_replicas"`
	// TopicConfigOverrides are further topic configs, e.g. cleanup.policy: compact.
	TopicConfigOverrides map[string]string `yaml:"topic_configs" json:"topic_configs,omitempty"`

	MessageSize int `yaml:"message_size" json:"message_size"` // value bytes; at least 16 (the send-time stamp)
	// Keys: "none" (keyless, sticky partitioning) or "random" (a random 16-byte key per record from
	// a pool of KeyCount keys, hashed to partitions).
	Keys     string `yaml:"keys" json:"keys"`
	KeyCount int    `yaml:"key_count" json:"key_count"`

	Producers int `yaml:"producers" json:"producers"` // per topic
	// Rate is the target of messages per second over all producers; 0 means as fast as the broker
	// takes them (each producer bounded by MaxPendingBytes of unacknowledged records).
	Rate            int           `yaml:"rate" json:"rate"`
	Acks            string        `yaml:"acks" json:"acks"`               // "0", "1" or "all"
	Compression     string        `yaml:"compression" json:"compression"` // "none" or "zstd"
	Linger          time.Duration `yaml:"linger" json:"linger"`
	BatchMaxBytes   int           `yaml:"batch_max_bytes" json:"batch_max_bytes"`
	MaxPendingBytes int64         `yaml:"max_pending_bytes" json:"max_pending_bytes"` // per producer

	ConsumerGroups    int `yaml:"consumer_groups" json:"consumer_groups"` // per topic; each reads every record
	ConsumersPerGroup int `yaml:"consumers_per_group" json:"consumers_per_group"`

	Warmup   time.Duration `yaml:"warmup" json:"warmup"`
	Duration time.Duration `yaml:"duration" json:"duration"`
}

// TopicConfigs are the config overrides of the workload's topics.
func (w Workload) TopicConfigs() map[string]string {
	if w.MinInsyncReplicas <= 0 && len(w.TopicConfigOverrides) == 0 {
		return nil
	}
	configs := map[string]string{}
	for key, value := range w.TopicConfigOverrides {
		configs[key] = value
	}
	if w.MinInsyncReplicas > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(w.MinInsyncReplicas)
	}
	return configs
}

// DefaultWorkload is what a workload file's missing keys fall back to.
func DefaultWorkload() Workload {
	return Workload{
		Topics: 1, Partitions: 8, ReplicationFactor: -1, MessageSize: 100, Keys: "none", KeyCount: 1000,
		Producers: 1, Acks: "1", Compression: "none", Linger: 5 * time.Millisecond,
		BatchMaxBytes: 1 << 20, MaxPendingBytes: 8 << 20,
		ConsumerGroups: 1, ConsumersPerGroup: 1,
		Warmup: 5 * time.Second, Duration: time.Minute,
	}
}

// LoadWorkload reads a workload file; unknown keys are errors, so a misspelt setting is not
// silently ignored. The name defaults to the file's base name.
func LoadWorkload(path string) (Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("bench: workload: %w", err)
	}
	w, err := ParseWorkload(data)
	if err != nil {
		return Workload{}, fmt.Errorf("bench: workload %s: %w", path, err)
	}
	if w.Name == "" {
		w.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return w, nil
}

// ParseWorkload decodes and validates a workload from YAML or JSON.
func ParseWorkload(data []byte) (Workload, error) {
	w := DefaultWorkload()
	decoder := yaml.NewDecoder(bytes.NewReader(data))
	decoder.KnownFields(true)
	if err := decoder.Decode(&w); err != nil && !errors.Is(err, io.EOF) { // empty: all defaults
		return Workload{}, oneLine(err)
	}
	if err := w.Validate(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// oneLine folds a multi-line YAML error into one line.
func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " "))
}

// Validate reports every setting out of range, joined on one line.
func (w Workload) Validate() error {
	var problems []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	check(w.Topics >= 1 && w.Topics <= 1000, "topics %d not in [1, 1000]", w.Topics)
	check(w.Partitions >= 1 && w.Partitions <= 10000, "partitions %d not in [1, 10000]", w.Partitions)
	check(w.ReplicationFactor == -1 || (w.ReplicationFactor >= 1 && w.ReplicationFactor <= 16), "replication_factor %d not -1 or in [1, 16]", w.ReplicationFactor)
	check(w.MinInsyncReplicas >= 0 && w.MinInsyncReplicas <= 16, "min_insync_replicas %d not in [0, 16]", w.MinInsyncReplicas)
	check(w.MessageSize >= MinMessageSize && w.MessageSize <= 16<<20, "message_size %d not in [%d, 16 MiB]", w.MessageSize, MinMessageSize)
	check(w.Keys == "none" || w.Keys == "random", "keys %q is not none or random", w.Keys)
	check(w.Keys == "none" || w.KeyCount >= 1, "key_count %d must be at least 1", w.KeyCount)
	check(w.Producers >= 0 && w.Producers <= 1000, "producers %d not in [0, 1000]", w.Producers)
	check(w.Rate >= 0, "rate %d is negative", w.Rate)
	_, acksErr := ParseAcks(w.Acks)
	check(acksErr == nil, "acks %q is not 0, 1 or all", w.Acks)
	check(w.Compression == "none" || w.Compression == "zstd", "compression %q is not none or zstd", w.Compression)
	check(w.Linger >= 0 && w.Linger <= time.Minute, "linger %v not in [0, 1m]", w.Linger)
	check(w.BatchMaxBytes >= 1024 && w.BatchMaxBytes >= w.MessageSize+128, "batch_max_bytes %d must be at least 1024 and hold one message", w.BatchMaxBytes)
	check(w.MaxPendingBytes >= int64(w.BatchMaxBytes), "max_pending_bytes %d must be at least batch_max_bytes", w.MaxPendingBytes)
	check(w.ConsumerGroups >= 0 && w.ConsumerGroups <= 100, "consumer_groups %d not in [0, 100]", w.ConsumerGroups)
	check(w.ConsumerGroups == 0 || (w.ConsumersPerGroup >= 1 && int32(w.ConsumersPerGroup) <= w.Partitions),
		"consumers_per_group %d not in [1, partitions]", w.ConsumersPerGroup)
	check(w.Warmup >= 0, "warmup %v is negative", w.Warmup)
	check(w.Duration >= time.Second, "duration %v is under 1s", w.Duration)
	check(w.Producers > 0 || w.ConsumerGroups > 0, "nothing to run: no producers and no consumer groups")
	if len(problems) > 0 {
		return fmt.Errorf("invalid workload: %s", strings.Join(problems, "; "))
	}
	return nil
}

// ParseAcks reads "0", "1", "all" (or "-1") as the Kafka acks value.
func ParseAcks(s string) (int16, error) {
	switch s {
	case "0":
		return 0, nil
	case "1":
		return 1, nil
	case "all", "-1":
		return -1, nil
	}
	return 0, fmt.Errorf("acks %q: want 0, 1 or all", s)
}
