package broker

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupLagMetrics: a share group that consumed everything, then five records with an
// hour-old timestamp that nobody consumes: its share partition reports a lag of 5 records and about
// an hour.
func TestShareGroupLagMetrics(t *testing.T) {
	b := startBroker(t, nil)
	admin := franzClient(t, b)
	franzCreateTopic(t, admin, "jobs", 1)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest"})
	produceNumbered(t, b, "jobs", 10)
	accepted := acceptLedger{newLedger()}
	worker := startShareWorker(t, b, "workers", "jobs", accepted.accept)
	accepted.awaitUnique(groupTestContext(t), t, 10)
	awaitShareDone(t, b, "workers", "jobs", 1, 10)
	worker.stop()

	producer := franzClient(t, b, kgo.DefaultProduceTopic("jobs"))
	hourAgo := time.Now().Add(-time.Hour)
	for i := range 5 {
		record := &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: hourAgo}
		if err := producer.ProduceSync(groupTestContext(t), record).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	b.WriteMetrics(&out)
	value := func(series string) float64 {
		t.Helper()
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				v, err := strconv.ParseFloat(rest, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		t.Fatalf("no %s in:\n%s", series, out.String())
		return 0
	}
	if lag := value(`sluice_share_group_lag_records{group="workers",topic="jobs",partition="0"}`); lag != 5 {
		t.Errorf("share lag %v records, want 5", lag)
	}
	if lag := value(`sluice_share_group_lag_seconds{group="workers",topic="jobs",partition="0"}`); lag < 3600 || lag > 3600+120 {
		t.Errorf("share lag %v seconds, want about an hour", lag)
	}
}
