// Package console is sluiced's built-in web console: server-rendered HTML pages under /ui on the
// broker's HTTP port (the one serving /metrics), showing the cluster, topics with their partitions,
// a topic's messages, consumer groups with their lag, live throughput and the broker's config.
//
// # Where the data comes from
//
// The console is just another Kafka client. It dials the broker's own Kafka listener
// (Config.Brokers) and asks what any client may ask: Metadata and DescribeCluster (nodes,
// controller, partitions, leaders, ISR), ListOffsets (log start and end), DescribeLogDirs (sizes
// and disk), DescribeConfigs (topic and broker configs), ListGroups, DescribeGroups,
// ConsumerGroupDescribe and OffsetFetch (groups and lag), and Fetch through this repository's
// client.Consumer (the message browser). Writes go through client.Admin (CreateTopics,
// DeleteTopics) and OffsetCommit / DeleteGroups. It reads no broker internals: what the console
// shows is what the wire protocol says, so a bug in the broker's answers shows here as it would in
// any other tool, and the console works unchanged against a remote sluice or Kafka cluster. Like
// the sluice CLI it uses franz-go (kgo, kmsg) for the requests client/ has no call for.
//
// # Samples
//
// Charts need history the protocol does not keep. A sampler goroutine (owned by Console, started
// by the first request to the console, so a broker whose console nobody opens sends itself no
// requests and the charts' history begins then; stopped by Close) asks every Config.SampleInterval for each partition's log end offset and each group's
// committed offsets, and keeps the last Config.SampleHistory samples in a ring (samples.go).
// Throughput is the change of log end offsets between samples (records appended, so retention
// and compaction do not make it negative); lag is log end minus committed offset. Memory is
// bounded: at most MaxSampledTopics topics and MaxSampledGroups groups are kept per sample (the
// first by name); pages say when the cap cut some off.
//
// # Writes
//
// Create topic, delete topic, reset a group's offsets and delete a group are POST forms, served
// only when Config.Writes is set (sluiced --ui-writes, off by default); otherwise every POST gets
// 403 and the pages show no forms. Each form carries a CSRF token: a random cookie set on the
// first GET (SameSite=Strict, HttpOnly) and, in the form, HMAC-SHA256 of that cookie under a key
// made at start; a POST whose token does not match its cookie, or whose Origin names another host,
// is refused with 403.
//
// Authorization hook: before any write the console calls Config.Authorize with the request and
// the Action (operation and resource). Today nothing is authenticated, so sluiced leaves it nil
// and --ui-writes alone decides. Once ACLs exist, Authorize must resolve the logged-in principal
// (from the HTTP authentication the console is given) and check the ACL for that principal, not
// for the console's own Kafka connection; and the console's Kafka client should then act as that
// principal (or as a principal allowed to act on behalf of it), so the broker checks the same ACL
// again. Reads are not checked yet: the same hook is the place to add describe/read checks.
// Where the Kafka listener requires TLS or SASL, Config.FranzOptions and Config.ClientOptions
// carry the console's own credentials to its two clients.
//
// # Invariants
//
//   - A GET never changes the cluster; the console's clients never create topics (metadata
//     requests have auto-creation off), so browsing a topic name that does not exist shows
//     "unknown topic" rather than creating it.
//   - Every Kafka request of a page is bounded by Config.RequestTimeout.
//   - The message browser has one client.Consumer, held by one page at a time (Console.messages,
//     a channel of capacity 1 used as a lock that a page's context can give up waiting on);
//     each read assigns one partition and unassigns it before handing the consumer back.
//   - Locks: sampleRing.mu is the only mutex, held only to copy samples in or out; it is never
//     held while waiting for Console.messages.
package console
