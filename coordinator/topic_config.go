package coordinator

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Topic config keys served by sluice. Any other key is refused with
// ErrInvalidConfig.
const (
	ConfigRetentionMs          = "retention.ms"
	ConfigRetentionBytes       = "retention.bytes"
	ConfigSegmentBytes         = "segment.bytes"
	ConfigSegmentMs            = "segment.ms"
	ConfigMaxMessageBytes      = "max.message.bytes"
	ConfigCleanupPolicy        = "cleanup.policy"
	ConfigMinInsyncReplicas    = "min.insync.replicas"
	ConfigFlushMessages        = "flush.messages"
	ConfigFlushMs              = "flush.ms"
	ConfigMessageTimestampType = "message.timestamp.type"
	ConfigCompressionType      = "compression.type"
	// ConfigUncleanLeaderElection lets a replica outside the ISR lead when no ISR member is live
	// (acknowledged records may be lost); false by default.
	ConfigUncleanLeaderElection = "unclean.leader.election.enable"
	// Log compaction (cleanup.policy=compact): see package compaction.
	ConfigDeleteRetentionMs      = "delete.retention.ms"
	ConfigMinCompactionLagMs     = "min.compaction.lag.ms"
	ConfigMaxCompactionLagMs     = "max.compaction.lag.ms"
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
)

// TopicConfigDefaults returns a fresh map of every served topic config key
// to Kafka's default value. The broker overwrites entries with its own
// flags before answering DescribeConfigs; the map is the caller's to change.
func TopicConfigDefaults() map[string]string {
	return map[string]string{
		ConfigRetentionMs:            "604800000", // 7 days
		ConfigRetentionBytes:         "-1",
		ConfigSegmentBytes:           "1073741824", // 1 GiB
		ConfigSegmentMs:              "604800000",
		ConfigMaxMessageBytes:        "1048588",
		ConfigCleanupPolicy:          "delete",
		ConfigMinInsyncReplicas:      "1",
		ConfigFlushMessages:          "9223372036854775807",
		ConfigFlushMs:                "9223372036854775807",
		ConfigMessageTimestampType:   "CreateTime",
		ConfigCompressionType:        "producer",
		ConfigUncleanLeaderElection:  "false",
		ConfigDeleteRetentionMs:      "86400000", // 1 day
		ConfigMinCompactionLagMs:     "0",
		ConfigMaxCompactionLagMs:     "9223372036854775807",
		ConfigMinCleanableDirtyRatio: "0.5",
	}
}

// TopicConfigKeys returns the served topic config keys in sorted order.
func TopicConfigKeys() []string {
	keys := make([]string, 0, 16)
	for key := range TopicConfigDefaults() {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// IsTopicConfigKey reports whether key is a served topic config key.
func IsTopicConfigKey(key string) bool {
	_, known := TopicConfigDefaults()[key]
	return known
}

// ValidateTopicConfigs validates every entry of configs, in sorted key order
// so the reported error is deterministic.
func ValidateTopicConfigs(configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for key := range configs {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if err := ValidateTopicConfig(key, configs[key]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateTopicConfig checks one key and value against Kafka's rules for
// that key. Errors wrap ErrInvalidConfig.
func ValidateTopicConfig(key, value string) error {
	switch key {
	case ConfigRetentionMs, ConfigRetentionBytes:
		return validateInteger(key, value, -1, math.MaxInt64)
	case ConfigSegmentBytes:
		return validateInteger(key, value, 14, math.MaxInt32)
	case ConfigSegmentMs:
		return validateInteger(key, value, 1, math.MaxInt64)
	case ConfigMaxMessageBytes:
		return validateInteger(key, value, 0, math.MaxInt32)
	case ConfigMinInsyncReplicas:
		return validateInteger(key, value, 1, math.MaxInt32)
	case ConfigFlushMessages:
		// Kafka's LogConfig defines flush.messages with atLeast(1).
		return validateInteger(key, value, 1, math.MaxInt64)
	case ConfigFlushMs:
		return validateInteger(key, value, 0, math.MaxInt64)
	case ConfigCleanupPolicy:
		return validateCleanupPolicy(value)
	case ConfigMessageTimestampType:
		return validateOneOf(key, value, "CreateTime", "LogAppendTime")
	case ConfigCompressionType:
		return validateOneOf(key, value, "producer", "uncompressed", "zstd", "gzip", "snappy", "lz4")
	case ConfigUncleanLeaderElection:
		return validateOneOf(key, value, "true", "false")
	case ConfigDeleteRetentionMs, ConfigMinCompactionLagMs:
		return validateInteger(key, value, 0, math.MaxInt64)
	case ConfigMaxCompactionLagMs:
		return validateInteger(key, value, 1, math.MaxInt64)
	case ConfigMinCleanableDirtyRatio:
		ratio, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || ratio < 0 || ratio > 1 {
			return fmt.Errorf("%w: %s=%q is not a number in [0, 1]", ErrInvalidConfig, key, value)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
	}
}

// validateInteger accepts a decimal integer in [minimum, maximum]; Kafka
// trims surrounding whitespace before parsing, and so does this.
func validateInteger(key, value string, minimum, maximum int64) error {
	number, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s=%q is not an integer", ErrInvalidConfig, key, value)
	}
	if number < minimum || number > maximum {
		return fmt.Errorf("%w: %s=%d is outside [%d, %d]", ErrInvalidConfig, key, number, minimum, maximum)
	}
	return nil
}

func validateOneOf(key, value string, allowed ...string) error {
	if slices.Contains(allowed, strings.TrimSpace(value)) {
		return nil
	}
	return fmt.Errorf("%w: %s=%q is not one of %s", ErrInvalidConfig, key, value, strings.Join(allowed, ", "))
}

// validateCleanupPolicy accepts Kafka's comma-separated list of "delete" and "compact" (at least
// one): compact keeps the latest record per key (package compaction), delete applies retention.
func validateCleanupPolicy(value string) error {
	policies := strings.Split(value, ",")
	for _, policy := range policies {
		switch strings.TrimSpace(policy) {
		case "delete", "compact":
		default:
			return fmt.Errorf("%w: %s=%q: each policy must be \"delete\" or \"compact\"", ErrInvalidConfig, ConfigCleanupPolicy, value)
		}
	}
	return nil
}

// CleanupPolicyHas reports whether a valid cleanup.policy value lists policy ("delete" or "compact").
func CleanupPolicyHas(value, policy string) bool {
	for _, p := range strings.Split(value, ",") {
		if strings.TrimSpace(p) == policy {
			return true
		}
	}
	return false
}
