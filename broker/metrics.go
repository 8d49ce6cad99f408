package broker

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerMetrics holds the broker's metrics, registered in the Set given in Config (none when nil).
type brokerMetrics struct {
	set   *metrics.Set
	mu    sync.Mutex
	byAPI map[int16]*apiMetrics

	producedBytes   *metrics.Counter
	producedRecords *metrics.Counter
	fetchedBytes    *metrics.Counter
	fsyncSeconds    *metrics.Histogram
	// replicationSentBytes counts record bytes sent to followers' fetches (fetchedBytes counts
	// consumers'); leaderElections counts partitions this broker took over at a new epoch.
	replicationSentBytes *metrics.Counter
	leaderElections      *metrics.Counter
}

type apiMetrics struct {
	requests *metrics.Counter
	errors   *metrics.Counter
	seconds  *metrics.Histogram

	// sizeBytes is the request frames' size (request_timing.go).
	sizeBytes *metrics.Histogram
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	if set == nil {
		set = metrics.NewSet() // private and never scraped: keeps the hot path free of nil checks
	}
	return &brokerMetrics{
		set:                  set,
		byAPI:                map[int16]*apiMetrics{},
		producedBytes:        set.NewCounter("sluice_produce_bytes_total"),
		producedRecords:      set.NewCounter("sluice_produce_records_total"),
		fetchedBytes:         set.NewCounter("sluice_fetch_bytes_total"),
		fsyncSeconds:         set.NewHistogram("sluice_log_fsync_duration_seconds"),
		replicationSentBytes: set.NewCounter("sluice_replication_sent_bytes_total"),
		leaderElections:      set.NewCounter("sluice_leader_elections_total"),
	}
}

// unknownAPIKey stands for every API key kmsg does not know, in byAPI.
const unknownAPIKey int16 = -1

func (m *brokerMetrics) api(key int16) *apiMetrics {
	name := kmsg.NameForKey(key)
	if name == "Unknown" {
		// kmsg names every key it does not know "Unknown". They share one series: registering the
		// name again for a second unknown key would panic, and clients must not mint series.
		key = unknownAPIKey
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.byAPI[key]; ok {
		return a
	}
	a := &apiMetrics{
		requests: m.set.NewCounter(fmt.Sprintf(`sluice_requests_total{api=%q}`, name)),
		errors:   m.set.NewCounter(fmt.Sprintf(`sluice_request_errors_total{api=%q}`, name)),
		seconds:  m.set.NewHistogram(fmt.Sprintf(`sluice_request_duration_seconds{api=%q}`, name)),
	}
	a.sizeBytes = m.set.NewHistogram(fmt.Sprintf(`sluice_request_size_bytes{api=%q}`, name))
	m.byAPI[key] = a
	return a
}

func (m *brokerMetrics) observeFsync(d time.Duration) { m.fsyncSeconds.Update(d.Seconds()) }

// WriteMetrics writes per-partition gauges; register it with the Set (RegisterMetricsWriter). It runs at scrape time: per-partition gauges without registering and
// unregistering metrics as topics come and go.
//
// Replication gauges: sluice_partition_under_replicated (1 when this broker leads the partition and
// its ISR is smaller than its replica set) and sluice_under_replicated_partitions (their count);
// sluice_follower_lag_records and sluice_follower_lag_bytes per follower of a partition this
// broker leads (bytes estimated from the log's average bytes per record);
// sluice_offline_partitions, partitions without a leader in the cluster metadata (every broker
// reports the same count).
func (b *Broker) WriteMetrics(w io.Writer) {
	underReplicated := 0
	b.registry.forEach(func(p *partition) {
		labels := fmt.Sprintf(`{topic=%q,partition="%d"}`, p.topic, p.index)
		logStart, logEnd, size := p.log.LogStartOffset(), p.log.LogEndOffset(), p.log.Size()
		fmt.Fprintf(w, "sluice_partition_log_end_offset%s %d\n", labels, logEnd)
		fmt.Fprintf(w, "sluice_partition_log_start_offset%s %d\n", labels, logStart)
		fmt.Fprintf(w, "sluice_partition_flushed_offset%s %d\n", labels, p.log.FlushedOffset())
		fmt.Fprintf(w, "sluice_partition_size_bytes%s %d\n", labels, size)
		fmt.Fprintf(w, "sluice_partition_high_watermark%s %d\n", labels, p.replica.HighWatermark())
		lags := p.replica.FollowerLags()
		if lags == nil {
			return // not the leader: the leader reports this partition's replication
		}
		under := 0
		bytesPerRecord := 0.0
		if logEnd > logStart {
			bytesPerRecord = float64(size) / float64(logEnd-logStart)
		}
		for _, lag := range lags {
			if !lag.InSync {
				under = 1
			}
			followerLabels := fmt.Sprintf(`{topic=%q,partition="%d",follower="%d"}`, p.topic, p.index, lag.Follower)
			fmt.Fprintf(w, "sluice_follower_lag_records%s %d\n", followerLabels, lag.Records)
			fmt.Fprintf(w, "sluice_follower_lag_bytes%s %.0f\n", followerLabels, float64(lag.Records)*bytesPerRecord)
		}
		underReplicated += under
		fmt.Fprintf(w, "sluice_partition_under_replicated%s %d\n", labels, under)
	})
	fmt.Fprintf(w, "sluice_under_replicated_partitions %d\n", underReplicated)
	offline := 0
	for _, t := range b.coordinator.Metadata().Topics {
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				offline++
			}
		}
	}
	fmt.Fprintf(w, "sluice_offline_partitions %d\n", offline)
	b.writeGroupLag(w)
	b.writeCleanerMetrics(w)
}
