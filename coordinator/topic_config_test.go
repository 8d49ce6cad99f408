package coordinator

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopicConfig(t *testing.T) {
	accepts := func(key, value string) {
		t.Helper()
		if err := ValidateTopicConfig(key, value); err != nil {
			t.Errorf("%s=%q refused: %v", key, value, err)
		}
	}
	refuses := func(key, value string) {
		t.Helper()
		if err := ValidateTopicConfig(key, value); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%q: got %v, want ErrInvalidConfig", key, value, err)
		}
	}
	for _, key := range []string{ConfigRetentionMs, ConfigRetentionBytes} {
		accepts(key, "-1")
		accepts(key, "0")
		accepts(key, "9223372036854775807")
		accepts(key, " 1000 ")
		refuses(key, "-2")
		refuses(key, "9223372036854775808")
		refuses(key, "1e3")
		refuses(key, "")
	}
	accepts(ConfigSegmentBytes, "14")
	accepts(ConfigSegmentBytes, "1073741824")
	accepts(ConfigSegmentBytes, "2147483647")
	refuses(ConfigSegmentBytes, "13")
	refuses(ConfigSegmentBytes, "2147483648")
	accepts(ConfigSegmentMs, "1")
	refuses(ConfigSegmentMs, "0")
	accepts(ConfigMaxMessageBytes, "0")
	accepts(ConfigMaxMessageBytes, "1048588")
	refuses(ConfigMaxMessageBytes, "-1")
	refuses(ConfigMaxMessageBytes, "2147483648")
	accepts(ConfigMinInsyncReplicas, "1")
	refuses(ConfigMinInsyncReplicas, "0")
	accepts(ConfigFlushMessages, "1")
	refuses(ConfigFlushMessages, "0")
	accepts(ConfigFlushMs, "0")
	refuses(ConfigFlushMs, "-1")
	accepts(ConfigCleanupPolicy, "delete")
	accepts(ConfigCleanupPolicy, "delete, delete")
	refuses(ConfigCleanupPolicy, "")
	refuses(ConfigCleanupPolicy, "DELETE")
	refuses(ConfigCleanupPolicy, "retain")
	accepts(ConfigMessageTimestampType, "CreateTime")
	accepts(ConfigMessageTimestampType, "LogAppendTime")
	refuses(ConfigMessageTimestampType, "createtime")
	for _, codec := range []string{"producer", "uncompressed", "zstd", "gzip", "snappy", "lz4"} {
		accepts(ConfigCompressionType, codec)
	}
	refuses(ConfigCompressionType, "brotli")
	refuses("retention.hours", "1")
	refuses("", "")

	for _, policy := range []string{"compact", "compact,delete", "delete, compact"} {
		accepts(ConfigCleanupPolicy, policy)
	}
	for _, policy := range []string{"", "compress", "compact,,delete"} {
		err := ValidateTopicConfig(ConfigCleanupPolicy, policy)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "must be") {
			t.Errorf("cleanup.policy=%q: got %v, want ErrInvalidConfig", policy, err)
		}
	}
	if !CleanupPolicyHas("delete, compact", "compact") || CleanupPolicyHas("delete", "compact") {
		t.Error("CleanupPolicyHas")
	}
	accepts(ConfigMinCleanableDirtyRatio, "0.1")
	refuses(ConfigMinCleanableDirtyRatio, "1.5")
	refuses(ConfigMinCleanableDirtyRatio, "half")
	accepts(ConfigDeleteRetentionMs, "0")
	refuses(ConfigMinCompactionLagMs, "-1")
	refuses(ConfigMaxCompactionLagMs, "0")
}

func TestTopicConfigDefaultsAreValid(t *testing.T) {
	defaults := TopicConfigDefaults()
	if err := ValidateTopicConfigs(defaults); err != nil {
		t.Fatalf("a default is invalid: %v", err)
	}
	keys := TopicConfigKeys()
	if len(keys) != len(defaults) || len(keys) != 16 {
		t.Fatalf("keys %v, defaults %v", keys, defaults)
	}
	for _, key := range keys {
		if !IsTopicConfigKey(key) {
			t.Errorf("%q is listed but not known", key)
		}
	}
	// The map is the caller's: changing it changes no later answer.
	defaults[ConfigRetentionMs] = "1"
	if TopicConfigDefaults()[ConfigRetentionMs] != "604800000" {
		t.Fatal("TopicConfigDefaults returned shared state")
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, name := range []string{"a", "orders", "Orders.v2", "with_underscore", "with-dash", "..a", strings.Repeat("x", 249), ConsumerOffsetsTopic} {
		if err := ValidateTopicName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", strings.Repeat("x", 250), "a/b", "a b", "tøpic", "a:b", "a\x00"} {
		if err := ValidateTopicName(name); !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("%q: got %v, want ErrInvalidTopicName", name, err)
		}
	}
}
