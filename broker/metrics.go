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
}

type apiMetrics struct {
	requests *metrics.Counter
	errors   *metrics.Counter
	seconds  *metrics.Histogram
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	if set == nil {
		set = metrics.NewSet() // private and never scraped: keeps the hot path free of nil checks
	}
	return &brokerMetrics{
		set:             set,
		byAPI:           map[int16]*apiMetrics{},
		producedBytes:   set.NewCounter("sluice_produce_bytes_total"),
		producedRecords: set.NewCounter("sluice_produce_records_total"),
		fetchedBytes:    set.NewCounter("sluice_fetch_bytes_total"),
		fsyncSeconds:    set.NewHistogram("sluice_log_fsync_duration_seconds"),
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
	m.byAPI[key] = a
	return a
}

func (m *brokerMetrics) observeFsync(d time.Duration) { m.fsyncSeconds.Update(d.Seconds()) }

// WriteMetrics writes per-partition gauges; register it with the Set (RegisterMetricsWriter). It runs at scrape time: per-partition gauges without registering and
// unregistering metrics as topics come and go.
func (b *Broker) WriteMetrics(w io.Writer) {
	b.registry.forEach(func(p *partition) {
		labels := fmt.Sprintf(`{topic=%q,partition="%d"}`, p.topic, p.index)
		fmt.Fprintf(w, "sluice_partition_log_end_offset%s %d\n", labels, p.log.LogEndOffset())
		fmt.Fprintf(w, "sluice_partition_log_start_offset%s %d\n", labels, p.log.LogStartOffset())
		fmt.Fprintf(w, "sluice_partition_flushed_offset%s %d\n", labels, p.log.FlushedOffset())
		fmt.Fprintf(w, "sluice_partition_size_bytes%s %d\n", labels, p.log.Size())
	})
	b.writeGroupLag(w)
}
