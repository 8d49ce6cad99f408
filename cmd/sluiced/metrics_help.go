package main

import "strings"

// metricHelps is the HELP text of every sluice_ family on /metrics. A family without an entry is
// exported with a placeholder that TestMetricsExposition refuses, so a new metric needs its line
// here. Units are in the names (Prometheus conventions: _total, _seconds, _bytes).
var metricHelps = map[string]string{
	// Requests (broker/api.go, broker/metrics.go).
	"sluice_requests_total":             "Kafka requests received, by API.",
	"sluice_request_errors_total":       "Kafka requests answered with an error (or closed), by API.",
	"sluice_request_duration_seconds":   "Time from a request's arrival to its response being queued, by API.",
	"sluice_produce_bytes_total":        "Record-batch bytes appended by produce requests.",
	"sluice_produce_records_total":      "Records appended by produce requests.",
	"sluice_fetch_bytes_total":          "Record-batch bytes sent to consumers.",
	"sluice_log_fsync_duration_seconds": "Duration of each group-commit fdatasync of a partition log.",
	"sluice_leader_elections_total":     "Partitions this broker took over as leader at a new epoch.",
	// Stage timings (broker/request_timing.go, from the tracing work of issue 15).
	"sluice_produce_stage_seconds":        "Time produce requests spend per stage: queue, append, fsync, replication (in-sync replicas' acks), send.",
	"sluice_fetch_stage_seconds":          "Time consumer fetches spend per stage: wait (for min bytes), read, send.",
	"sluice_produce_replica_wait_seconds": "Time from an acks=all produce's append on the leader until the last in-sync follower reported it fetched (followers_fetched) and durable (followers_durable, fsync replica acks).",
	"sluice_request_size_bytes":           "Size of request frames, by API.",

	// Per topic (broker/metrics_topics.go), capped by --metrics-max-topics.
	"sluice_topic_produce_requests_total": "Produce requests naming the topic (topic=\"__other\": past --metrics-max-topics or unknown).",
	"sluice_topic_fetch_requests_total":   "Consumer fetch responses naming the topic.",
	"sluice_topic_records_in_total":       "Records appended to the topic by producers.",
	"sluice_topic_bytes_in_total":         "Record-batch bytes appended to the topic by producers.",
	"sluice_topic_records_out_total":      "Offsets of the topic delivered to consumers (whole batches past the fetch offset).",
	"sluice_topic_bytes_out_total":        "Record-batch bytes of the topic sent to consumers.",
	"sluice_topic_errors_total":           "Partitions of produce and fetch requests answered with an error, by topic, API and Kafka error code.",

	// Consumer lag (broker/metrics_group_lag.go), for the partitions this broker leads.
	"sluice_group_lag_records":       "Records between a group's committed offset and the high watermark.",
	"sluice_group_lag_seconds":       "Age of the oldest record a group has not consumed (0 when caught up).",
	"sluice_group_total_lag_records": "A group's records lag summed over the partitions this broker leads.",
	"sluice_group_max_lag_seconds":   "A group's largest seconds lag over the partitions this broker leads.",
	"sluice_share_group_lag_records": "Records of a share partition not yet acknowledged (from the share-partition start offset).",
	"sluice_share_group_lag_seconds": "Age of the oldest record at a share partition's start offset (0 when caught up).",

	// Partitions and disk (broker/metrics.go, broker/metrics_disk.go, broker/log_cleaner.go).
	"sluice_partition_log_end_offset":    "Offset after the last record of the partition's log.",
	"sluice_partition_log_start_offset":  "First offset still in the partition's log.",
	"sluice_partition_flushed_offset":    "Offset below which the partition's log is fsynced.",
	"sluice_partition_size_bytes":        "Bytes of the partition's log segments.",
	"sluice_partition_high_watermark":    "The partition's high watermark: offsets below it are committed.",
	"sluice_partition_segments":          "Segment files of the partition's log.",
	"sluice_partition_under_replicated":  "1 when this broker leads the partition and its ISR is smaller than its replica set.",
	"sluice_partition_dirty_ratio":       "Share of a compacted partition's log not yet cleaned.",
	"sluice_partition_cleaned_offset":    "Offset up to which a compacted partition's log is cleaned.",
	"sluice_under_replicated_partitions": "Partitions this broker leads whose ISR is smaller than their replica set.",
	"sluice_offline_partitions":          "Partitions without a leader in the cluster metadata.",
	"sluice_follower_lag_records":        "Records a follower is behind the leader's log end, per follower of a partition this broker leads.",
	"sluice_follower_lag_bytes":          "Bytes a follower is behind (estimated from the log's average record size).",
	"sluice_data_dir_free_bytes":         "Bytes still usable on the file system of the data directory.",
	"sluice_data_dir_capacity_bytes":     "Size of the file system of the data directory.",
	"sluice_data_dir_log_bytes":          "Bytes of the partition logs in the data directory.",
	"sluice_data_dir_segments":           "Segment files of the partition logs in the data directory.",
	"sluice_listener_connections":        "Open client connections, by listener.",

	// Log cleaner (broker/log_cleaner.go).
	"sluice_cleaner_passes_total":            "Log cleaner passes run.",
	"sluice_cleaner_segments_cleaned_total":  "Segments the log cleaner rewrote.",
	"sluice_cleaner_errors_total":            "Log cleaner passes that failed.",
	"sluice_cleaner_read_bytes_total":        "Bytes the log cleaner read.",
	"sluice_cleaner_reclaimed_bytes_total":   "Bytes the log cleaner freed.",
	"sluice_cleaner_cleaned_bytes_total":     "Bytes the log cleaner wrote.",
	"sluice_cleaner_throttled_seconds_total": "Time the log cleaner waited on its I/O limit (--cleaner-io-bytes-per-second).",

	// Replication (replication/manager.go).
	"sluice_replication_fetched_bytes_total":       "Record bytes this broker fetched as a follower.",
	"sluice_replication_sent_bytes_total":          "Record bytes this broker sent to followers.",
	"sluice_replication_truncations_total":         "Follower log truncations to a diverging leader epoch.",
	"sluice_replication_log_resets_total":          "Follower logs restarted at the leader's log start.",
	"sluice_replication_damaged_reads_total":       "Follower fetches this node, leading, could not serve because its own log is damaged there.",
	"sluice_replication_leader_damaged_total":      "Fetches this node, following, answered CORRUPT_MESSAGE by the leader.",
	"sluice_replication_leader_resignations_total": "Leaderships this node handed off because its log is damaged or failed (an fsync or write error).",
	"sluice_replication_damage_truncations_total":  "Follower logs truncated at damaged data.",
	"sluice_isr_shrinks_total":                     "Followers this broker removed from an ISR as leader.",
	"sluice_isr_expands_total":                     "Followers this broker added back to an ISR as leader.",

	// Controller and Raft (coordinator/metrics.go).
	"sluice_controller_changes_total":           "Times this node saw the controller change to a known node.",
	"sluice_controller_is_active":               "1 while this node is the controller.",
	"sluice_controller_id":                      "The controller this node knows of; -1 while it knows none.",
	"sluice_brokers_fenced_total":               "Brokers this node, as controller, fenced for a missed session.",
	"sluice_broker_probes_total":                "Connection probes this node, as controller, made to brokers silent for 400 ms (coordinator.Config.BrokerProbeAfter).",
	"sluice_brokers_probed_dead_total":          "Brokers this node, as controller, fenced at once because their listener refused a probe (the process is gone).",
	"sluice_unreachable_leader_demotions_total": "Leaders this node, as controller, moved off because every other in-sync member reported them unreachable.",
	"sluice_read_barriers_total":                "Metadata read-barrier rounds this node ran (one round serves every reader queued meanwhile).",
	"sluice_read_barrier_failures_total":        "Read-barrier rounds that could not confirm a fresh metadata view (their readers were refused).",
	"sluice_controller_failover_seconds":        "Time from a fenced broker's last heartbeat to the commit that moved its leaderships.",
	"sluice_raft_apply_duration_seconds":        "Metadata commit latency: from proposing a command on the controller to its application.",
	"sluice_raft_leader_changes_total":          "Raft leader changes this node observed.",
	"sluice_raft_term":                          "Current Raft term of this node's metadata replica.",
	"sluice_raft_commit_index":                  "Raft commit index of this node's metadata replica.",
	"sluice_raft_applied_index":                 "Raft index last applied to this node's metadata.",
	"sluice_raft_last_log_index":                "Last Raft index in this node's metadata log.",
	"sluice_raft_is_leader":                     "1 on the metadata Raft leader.",
	"sluice_raft_last_contact_seconds":          "On a follower, time since it last heard from the Raft leader (0 on the leader, -1 never).",

	// Transactions (broker/txn_coordinator.go).
	"sluice_transactions_open":            "Transactions open on this transaction coordinator.",
	"sluice_transactions_committed_total": "Transactions committed.",
	"sluice_transactions_aborted_total":   "Transactions aborted.",
	"sluice_transactions_timed_out_total": "Transactions aborted for running past their timeout.",

	// Security (broker/security.go).
	"sluice_sasl_authentications_total":         "SASL authentications that succeeded.",
	"sluice_sasl_authentication_failures_total": "SASL authentications refused (wrong user or password); the connection is closed.",
	"sluice_authorization_refusals_total":       "Requests (or parts of them) the authorizer refused.",

	// Network (netpoll/server.go).
	"sluice_net_connections":                  "Open client connections.",
	"sluice_net_connections_evicted_total":    "Connections closed or refused to protect the server, by reason.",
	"sluice_net_bytes_in_total":               "Bytes received from clients.",
	"sluice_net_bytes_out_total":              "Bytes sent to clients.",
	"sluice_net_sendfile_bytes_total":         "Response bytes sent from files with sendfile.",
	"sluice_net_copied_file_bytes_total":      "Response bytes read from files and copied (sendfile unavailable).",
	"sluice_net_frames_rejected_total":        "Request frames refused (over the size limit or malformed).",
	"sluice_net_output_parks_total":           "Times a connection's output was parked on a full socket.",
	"sluice_net_tls_handshake_failures_total": "TLS connections closed because their handshake failed.",
}

// undocumentedHelp marks a sluice_ family missing from metricHelps.
const undocumentedHelp = "Undocumented sluice metric (add it to cmd/sluiced/metrics_help.go)."

func metricHelp(family string) string {
	if help, ok := metricHelps[family]; ok {
		return help
	}
	if strings.HasPrefix(family, "sluice_") {
		return undocumentedHelp
	}
	// The metrics library's Go runtime and process metrics (WriteProcessMetrics, WriteFDMetrics).
	return "Go runtime or process statistic " + family + ", as the VictoriaMetrics/metrics library reports it."
}
