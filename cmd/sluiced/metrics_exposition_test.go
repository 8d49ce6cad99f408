package main

import "testing"

// TestAnnotateExposition: interleaved families are regrouped, each led once by HELP and TYPE;
// histograms and summaries are recognised by their le and quantile labels, _total makes a counter,
// a declared family without samples is still listed, and the library's misnamed metrics are renamed.
func TestAnnotateExposition(t *testing.T) {
	raw := `sluice_partition_size_bytes{topic="a",partition="0"} 10
sluice_partition_high_watermark{topic="a",partition="0"} 3
sluice_partition_size_bytes{topic="a",partition="1"} 20
sluice_partition_high_watermark{topic="a",partition="1"} 4
# TYPE sluice_share_group_lag_records gauge
sluice_log_fsync_duration_seconds_bucket{le="0.1"} 1
sluice_log_fsync_duration_seconds_bucket{le="+Inf"} 2
sluice_log_fsync_duration_seconds_sum 0.3
sluice_log_fsync_duration_seconds_count 2
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.01
go_gc_duration_seconds_count 9
process_io_read_bytes_total 5
go_cgo_calls_count 7
`
	want := `# HELP sluice_partition_size_bytes Bytes of the partition's log segments.
# TYPE sluice_partition_size_bytes gauge
sluice_partition_size_bytes{topic="a",partition="0"} 10
sluice_partition_size_bytes{topic="a",partition="1"} 20
# HELP sluice_partition_high_watermark The partition's high watermark: offsets below it are committed.
# TYPE sluice_partition_high_watermark gauge
sluice_partition_high_watermark{topic="a",partition="0"} 3
sluice_partition_high_watermark{topic="a",partition="1"} 4
# HELP sluice_share_group_lag_records Records of a share partition not yet acknowledged (from the share-partition start offset).
# TYPE sluice_share_group_lag_records gauge
# HELP sluice_log_fsync_duration_seconds Duration of each group-commit fdatasync of a partition log.
# TYPE sluice_log_fsync_duration_seconds histogram
sluice_log_fsync_duration_seconds_bucket{le="0.1"} 1
sluice_log_fsync_duration_seconds_bucket{le="+Inf"} 2
sluice_log_fsync_duration_seconds_sum 0.3
sluice_log_fsync_duration_seconds_count 2
# HELP go_gc_duration_seconds Go runtime or process statistic go_gc_duration_seconds, as the VictoriaMetrics/metrics library reports it.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.01
go_gc_duration_seconds_count 9
# HELP process_io_read_bytes_total Go runtime or process statistic process_io_read_bytes_total, as the VictoriaMetrics/metrics library reports it.
# TYPE process_io_read_bytes_total counter
process_io_read_bytes_total 5
# HELP go_cgo_calls_total Go runtime or process statistic go_cgo_calls_total, as the VictoriaMetrics/metrics library reports it.
# TYPE go_cgo_calls_total counter
go_cgo_calls_total 7
`
	if got := string(annotateExposition([]byte(raw))); got != want {
		t.Errorf("annotated:\n%s\nwant:\n%s", got, want)
	}
}
