// Package console is sluiced's built-in web console: server-rendered HTML pages under /ui on the
// broker's HTTP port (the one serving /metrics), showing the cluster, topics with their partitions,
// a topic's messages, consumer groups with their lag, live throughput and the broker's config.
//
// # Where the data comes from
//
// The console is just another Kafka client (one set of clients per identity: shared without
// login, one per session with it; kafka.go). It dials the broker's own Kafka listener
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
// Config.Authorize, when set, is asked before every write with the request and the Action
// (operation and resource), after the CSRF check; its error refuses the write with 403. It is an
// extra policy of the embedding program: where the listener needs SASL, the broker already checks
// every write against the logged-in user's ACLs (see Login), and a refusal shows the broker's
// error (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED)
// with status 403.
//
// # Login
//
// When Config.SASLMechanism is set (sluiced sets it when the listener the console dials needs
// SASL: --require-sasl, or a SASL_PLAINTEXT or SASL_SSL listener), every page but the login form
// (/ui/login) and the static files needs a session. The login form (POST, CSRF-protected like the
// write forms) takes a user name and password, and the console checks them the only way it can:
// it makes a set of Kafka clients that authenticate as that user with that mechanism and sends a
// Metadata request through each. A refusal answers 401 on the form (after 5 refusals within a
// minute, a remote host gets 429 without the broker being asked, until the minute is over).
// Success starts a session: a random 32-byte id in a cookie (HttpOnly, SameSite=Strict,
// Path=/ui, Secure over HTTPS, expiring with the session), held server-side with the user's
// clients. Every page and write of
// the session goes through those clients, so the broker's ACLs decide what the user sees (a topic
// without DESCRIBE is not listed and its pages answer 404) and may change. A session ends at
// logout (POST /ui/logout), after Config.SessionIdleTimeout unused or Config.SessionMaxAge after
// login (a sweeper goroutine, owned by Console, ends expired ones), or when a login past
// Config.MaxSessions evicts the least recently used one; its clients are closed then. The
// password is kept only inside the session's clients (they re-authenticate new connections).
//
// The charts' sampler needs a principal of its own: Config.SamplerUser and SamplerPassword
// (sluiced --ui-sasl-user, --ui-sasl-password). Without them no sampler runs behind a SASL
// listener and the charts stay empty. With them, pages show a user only the sampled topics their
// own Metadata lists, and a group's lag chart only their visible topics' partitions, so the
// sampler's wider view leaks no topic names.
//
// Without SASL on the listener nothing of this applies: one set of shared clients serves every
// page and the sampler, and there is no login. Where the listener needs TLS,
// Config.FranzOptions and Config.ClientOptions carry the TLS settings to every client (sluiced
// passes a config that trusts the broker's own certificate or its --tls-ca).
//
// # Invariants
//
//   - A GET never changes the cluster; the console's clients never create topics (metadata
//     requests have auto-creation off), so browsing a topic name that does not exist shows
//     "unknown topic" rather than creating it.
//   - Every Kafka request of a page is bounded by Config.RequestTimeout.
//   - Each set of clients has one message browser client.Consumer, held by one page at a time
//     (kafkaClients.messages, a channel of capacity 1 used as a lock that a page's context can
//     give up waiting on); each read assigns one partition and unassigns it before handing the
//     consumer back.
//   - With login, every handler runs with the clients of a live session (kafkaOf); a request
//     without one gets the login form (GET) or 401 (POST), and never the sampler's clients.
//   - Locks: sampleRing.mu, sessionStore.mu and loginLimiter.mu, never held together, each held
//     only to copy or change its map; neither is held while closing clients or waiting for a messages channel.
package console
