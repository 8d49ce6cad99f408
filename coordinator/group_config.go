package coordinator

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Group config keys served by sluice (Kafka's group-level configs, KIP-848 and KIP-932), set with
// IncrementalAlterConfigs on resource type GROUP. Any other key is refused with ErrInvalidConfig.
// Bounds are wider than Kafka's broker defaults allow (1 s minimum for every duration) so that
// tests and demos can use short timeouts.
const (
	GroupConfigConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConfigConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
	GroupConfigShareSessionTimeoutMs       = "share.session.timeout.ms"
	GroupConfigShareHeartbeatIntervalMs    = "share.heartbeat.interval.ms"
	GroupConfigShareRecordLockDurationMs   = "share.record.lock.duration.ms"
	GroupConfigShareDeliveryCountLimit     = "share.delivery.count.limit"
	GroupConfigShareAutoOffsetReset        = "share.auto.offset.reset"
	GroupConfigShareIsolationLevel         = "share.isolation.level"
)

// GroupConfigDefaults returns a fresh map of every served group config key to Kafka's default.
func GroupConfigDefaults() map[string]string {
	return map[string]string{
		GroupConfigConsumerSessionTimeoutMs:    "45000",
		GroupConfigConsumerHeartbeatIntervalMs: "5000",
		GroupConfigShareSessionTimeoutMs:       "45000",
		GroupConfigShareHeartbeatIntervalMs:    "5000",
		GroupConfigShareRecordLockDurationMs:   "30000",
		GroupConfigShareDeliveryCountLimit:     "5",
		GroupConfigShareAutoOffsetReset:        "latest",
		GroupConfigShareIsolationLevel:         "read_uncommitted",
	}
}

// GroupConfigKeys returns the served group config keys, sorted.
func GroupConfigKeys() []string { return slices.Sorted(maps.Keys(GroupConfigDefaults())) }

// ValidateGroupConfigs validates every entry, in sorted key order.
func ValidateGroupConfigs(configs map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		if err := ValidateGroupConfig(key, configs[key]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateGroupConfig checks one group config entry. Errors wrap ErrInvalidConfig.
func ValidateGroupConfig(key, value string) error {
	switch key {
	case GroupConfigConsumerSessionTimeoutMs, GroupConfigShareSessionTimeoutMs, GroupConfigShareRecordLockDurationMs:
		return validateInteger(key, value, 1000, 3_600_000)
	case GroupConfigConsumerHeartbeatIntervalMs, GroupConfigShareHeartbeatIntervalMs:
		return validateInteger(key, value, 100, math.MaxInt32)
	case GroupConfigShareDeliveryCountLimit:
		return validateInteger(key, value, 1, 100)
	case GroupConfigShareAutoOffsetReset:
		_, err := ParseShareAutoOffsetReset(value)
		return err
	case GroupConfigShareIsolationLevel:
		return validateOneOf(key, value, "read_uncommitted", "read_committed")
	default:
		return fmt.Errorf("%w: unknown group config %q", ErrInvalidConfig, key)
	}
}

// ShareAutoOffsetReset is where a share group starts reading a partition it has no state for.
type ShareAutoOffsetReset struct {
	// Earliest: the log start; otherwise the log end, unless ByDuration is set.
	Earliest bool
	// ByDuration: the first record at most this old (by_duration:<ISO-8601 duration>).
	ByDuration time.Duration
}

// ParseShareAutoOffsetReset reads "earliest", "latest" or "by_duration:PnDTnHnMnS".
func ParseShareAutoOffsetReset(value string) (ShareAutoOffsetReset, error) {
	value = strings.TrimSpace(value)
	switch {
	case value == "earliest":
		return ShareAutoOffsetReset{Earliest: true}, nil
	case value == "latest":
		return ShareAutoOffsetReset{}, nil
	case strings.HasPrefix(value, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(value, "by_duration:"))
		if err != nil {
			return ShareAutoOffsetReset{}, fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, GroupConfigShareAutoOffsetReset, value, err)
		}
		return ShareAutoOffsetReset{ByDuration: d}, nil
	}
	return ShareAutoOffsetReset{}, fmt.Errorf("%w: %s=%q is not earliest, latest or by_duration:<duration>",
		ErrInvalidConfig, GroupConfigShareAutoOffsetReset, value)
}

// parseISODuration reads the day-time subset of ISO-8601 durations Java's Duration.parse accepts:
// PnDTnHnMn.nS (each part optional, at least one present, none negative).
func parseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, fmt.Errorf("duration %q does not start with P", s)
	}
	var total time.Duration
	units := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}
	inTime := false
	number := ""
	parts := 0
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case c == 'T' && !inTime && number == "":
			inTime = true
		case c >= '0' && c <= '9' || c == '.' && inTime:
			number += string(c)
		case units[c] != 0 && number != "" && (c == 'D') != inTime:
			d, err := time.ParseDuration(number + "s")
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			total += time.Duration(float64(units[c]) * d.Seconds())
			number = ""
			parts++
		default:
			return 0, fmt.Errorf("duration %q: unexpected %q", s, c)
		}
	}
	if number != "" || parts == 0 {
		return 0, fmt.Errorf("duration %q is incomplete", s)
	}
	return total, nil
}
