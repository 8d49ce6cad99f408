package broker

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/replication"
)

// brokerMetrics holds the broker's metrics, registered in the Set given in Config (none when nil).
type brokerMetrics struct {
	set   *metrics.Set
	mu    sync.Mutex
	byAPI map[int16]*apiMetrics

	producedBytes   *metrics.Counter
	producedRecords *metrics.Counter
	fetchedBytes    *metrics.Counter
	fsyncSeconds    *metrics.PrometheusHistogram
	// replicaWait is sluice_produce_replica_wait_seconds by replication.AckWaitStage.
	replicaWait [2]*metrics.PrometheusHistogram
	// replicationSentBytes counts record bytes sent to followers' fetches (fetchedBytes counts
	// consumers'); leaderElections counts partitions this broker took over at a new epoch.
	replicationSentBytes *metrics.Counter
	leaderElections      *metrics.Counter
	// topics holds the per-topic counters (metrics_topics.go).
	topics *topicMetrics
}

type apiMetrics struct {
	requests *metrics.Counter
	errors   *metrics.Counter
	seconds  *metrics.PrometheusHistogram

	// sizeBytes is the request frames' size (request_timing.go).
	sizeBytes *metrics.PrometheusHistogram
}

// latencyBuckets are the upper bounds, in seconds, of the broker's latency histograms: 50 µs to
// 30 s. They are Prometheus histograms (le buckets) so histogram_quantile works on them.
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// sizeBuckets are the upper bounds, in bytes, for size histograms (sluice_request_size_bytes):
// 64 bytes to 128 MiB by fours.
var sizeBuckets = []float64{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 128 << 20}

func newBrokerMetrics(set *metrics.Set, topics *topicMetrics) *brokerMetrics {
	if set == nil {
		set = metrics.NewSet() // private and never scraped: keeps the hot path free of nil checks
	}
	m := &brokerMetrics{
		set:                  set,
		byAPI:                map[int16]*apiMetrics{},
		producedBytes:        set.NewCounter("sluice_produce_bytes_total"),
		producedRecords:      set.NewCounter("sluice_produce_records_total"),
		fetchedBytes:         set.NewCounter("sluice_fetch_bytes_total"),
		fsyncSeconds:         set.NewPrometheusHistogramExt("sluice_log_fsync_duration_seconds", latencyBuckets),
		replicationSentBytes: set.NewCounter("sluice_replication_sent_bytes_total"),
		leaderElections:      set.NewCounter("sluice_leader_elections_total"),
		topics:               topics,
	}
	for _, stage := range []replication.AckWaitStage{replication.FollowersFetched, replication.FollowersDurable} {
		m.replicaWait[stage] = set.NewPrometheusHistogramExt(fmt.Sprintf(`sluice_produce_replica_wait_seconds{stage=%q}`, stage), latencyBuckets)
	}
	return m
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
		seconds:  m.set.NewPrometheusHistogramExt(fmt.Sprintf(`sluice_request_duration_seconds{api=%q}`, name), latencyBuckets),
	}
	a.sizeBytes = m.set.NewPrometheusHistogramExt(fmt.Sprintf(`sluice_request_size_bytes{api=%q}`, name), sizeBuckets)
	m.byAPI[key] = a
	return a
}

func (m *brokerMetrics) observeFsync(d time.Duration) { m.fsyncSeconds.Update(d.Seconds()) }

// observeReplicaWait is replication.Config.ObserveAckWait: it runs under a replica's lock.
func (m *brokerMetrics) observeReplicaWait(stage replication.AckWaitStage, d time.Duration) {
	m.replicaWait[stage].Update(d.Seconds())
}

// WriteMetrics writes per-partition gauges; register it with the Set (RegisterMetricsWriter). It runs at scrape time: per-partition gauges without registering and
// unregistering metrics as topics come and go.
//
// Replication gauges: sluice_partition_under_replicated (1 when this broker leads the partition and
// its ISR is smaller than its replica set) and sluice_under_replicated_partitions (their count);
// sluice_follower_lag_records and sluice_follower_lag_bytes per follower of a partition this
// broker leads (bytes estimated from the log's average bytes per record);
// sluice_offline_partitions, partitions without a leader in the cluster metadata (every broker
// reports the same count).
//
// Also: sluice_partition_segments per partition; the data directory's gauges (metrics_disk.go);
// sluice_listener_connections{listener,protocol,address}; consumer and share-group lag
// (metrics_group_lag.go); the log cleaner's (log_cleaner.go); the per-topic counters
// (metrics_topics.go). cmd/sluiced adds the HELP text and regroups families (metrics_exposition.go).
//
// Topic-labelled series are written for the topics with per-topic series only (--metrics-max-topics,
// metrics_topics.go); the others count in the totals.
func (b *Broker) WriteMetrics(w io.Writer) {
	b.admitLocalTopics()
	exported := b.metrics.topics.has
	underReplicated := 0
	var logBytes int64
	segments := 0
	b.registry.forEach(func(p *partition) {
		logBytes += p.log.Size()
		segments += p.log.SegmentCount()
		if !exported(p.topic) {
			if lags := p.replica.FollowerLags(); lags != nil && slices.ContainsFunc(lags, func(l replication.FollowerLag) bool { return !l.InSync }) {
				underReplicated++
			}
			return
		}
		labels := fmt.Sprintf(`{topic=%q,partition="%d"}`, p.topic, p.index)
		logStart, logEnd, size := p.log.LogStartOffset(), p.log.LogEndOffset(), p.log.Size()
		fmt.Fprintf(w, "sluice_partition_segments%s %d\n", labels, p.log.SegmentCount())
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
	b.writeDataDirMetrics(w, logBytes, segments)
	if b.server != nil {
		for _, l := range b.server.Connections() {
			fmt.Fprintf(w, "sluice_listener_connections{listener=%q,protocol=%q,address=%q} %d\n", l.Name, l.SecurityProtocol, l.Address.String(), l.Connections)
		}
	}
	b.writeGroupLag(w)
	b.writeCleanerMetrics(w)
	b.metrics.topics.write(w)
}
