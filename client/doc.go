// Package client is sluice's Go client for the Kafka protocol: a batching producer, a consumer of
// assigned partitions and admin calls. It speaks to sluiced and to any Kafka broker (record batch
// v2: Produce 3+, Fetch 4+), encoding requests with kmsg.
//
// # Shape
//
// A Client holds the connections (one per broker and role: admin/metadata, produce, fetch, so a
// long-polling fetch never delays a produce answer) and the metadata cache. Producer, Consumer and
// Admin are built on one Client:
//
//	c, _ := client.New(client.WithSeedBrokers("127.0.0.1:9092"))
//	p, _ := client.NewProducer(ctx, c, client.WithAcks(client.AcksAll))
//	consumer, _ := client.NewConsumer(c)
//	admin := client.NewAdmin(c)
//
// # Producer contract
//
//   - Produce returning nil means the record's callback will be called exactly once, with the
//     delivery outcome; Produce returning an error means the record was not taken and the callback
//     will not be called. Close flushes, and past its context fails every record left with
//     ErrClosed through its callback: no record is dropped without a report.
//   - Records of one partition are written in the order Produce accepted them, also across
//     retries: a partition has at most one batch in flight, and a retried batch goes back to the
//     front of its partition's queue. Callbacks of one partition run in offset order.
//   - Delivery is at least once: a batch whose answer was lost (a broker killed mid-request) is
//     sent again. With a producer id (when the broker serves InitProducerId, as sluiced does) the
//     broker recognises the resend by its sequence numbers and stores it once; without one it may
//     be stored twice. A batch the broker refuses outright gives its sequences back to the next
//     batch of its partition.
//   - Buffered bytes (accepted, not yet reported) stay below WithMaxBufferedBytes: Produce waits
//     for room, or fails with ErrBufferFull under WithBufferFullError.
//   - Partitioning: a record with a key goes to KeyPartition(key, n), which is the Java client's
//     and franz-go's choice; keyless records stick to one partition per batch.
//
// # Producer data path
//
// Produce encodes the record straight into its partition's open batch (behind 61 reserved header
// bytes). A batch closes when the next record would overflow WithBatchMaxBytes; the sender
// goroutine also takes an open batch once it is WithLinger old, or at once during Flush. Each
// sender pass takes at most one batch per partition with nothing in flight, groups them by leader
// and sends one Produce per leader, within WithMaxInFlightPerBroker requests per broker. Answers
// come back on the connection's reader goroutine, which runs the callbacks and wakes the sender.
// Retriable errors (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, network failures...)
// trigger a metadata refresh and a retry with exponential backoff until WithMaxRetries or
// WithDeliveryTimeout is reached.
//
// # Consumer
//
// A Consumer reads partitions it is assigned with Assign (start, end, exact offset or time). A
// fetch loop keeps one fetch in flight per leader while less than WithConsumerBufferBytes is
// buffered; Poll returns what was fetched as one Fetch per partition answer.
//
// # Group consumer
//
// A GroupConsumer (group*.go) is a member of a consumer group on top of its own Consumer: a
// background goroutine joins (FindCoordinator, JoinGroup with the member-id-required rejoin,
// SyncGroup), heartbeats on a connection of its own to the coordinator, and turns each
// assignment into Assign (from the OffsetFetch'd committed offset, else WithResetOffset) and
// revocations into an unassignment that reads the positions in the same step, then OnRevoked,
// then a commit of those positions: the next owner starts after the last record Poll returned
// here. The leader assigns with a Balancer ("range", "cooperative-sticky": pure functions in
// assign_*.go) over the standard ConsumerProtocol bytes (group_protocol.go), so members of other
// clients can share the group. A second goroutine commits every WithAutoCommitInterval. With
// WithGroupProtocol(GroupProtocolConsumer) the background goroutine speaks KIP-848 instead
// (group_kip848.go): ConsumerGroupHeartbeat carries the subscription and owned partitions, the
// broker assigns, revocations are committed and reported before the broker hands the partitions
// on, and commits carry the member epoch.
//
// # Transactions
//
// A Producer made WithTransactionalID writes transactions (txn_producer.go): BeginTransaction,
// Produce, SendOffsets (a group's input offsets, committed with the output), CommitTransaction or
// AbortTransaction. Consumers WithReadCommitted read only committed records: the broker stops them
// at the last stable offset and lists the aborted transactions, whose batches the decoder drops
// (decode_txn.go). A second producer with the same transactional id fences the first
// (ErrProducerFenced). ExampleProducer_transaction is a consume-transform-produce loop.
//
// # Share consumer
//
// A ShareConsumer (share.go) is a member of a share group (KIP-932): every member fetches from
// every partition and the broker hands each record to one member at a time. Each record is
// acknowledged with Accept, Release or Reject; acknowledgements ride on the next Poll's ShareFetch
// (one share session per partition leader), or go out with Commit or Close.
//
// # Errors
//
// Broker error codes come back as *KafkaError (errors.As), which also unwraps to the
// protocol.ErrorCode value (errors.Is(err, protocol.TopicAlreadyExists)). Connection failures wrap
// ErrNetwork. IsRetriable tells the two retriable kinds from the rest.
//
// # Locks
//
// Producer: closeGate (shared, across Produce) before txnState.mu (held across transaction
// coordinator round trips) before producerTopic.sticky before producerPartition.mu. Close closes the closing channel before it takes closeGate, so a Produce
// waiting for buffer room (which watches that channel) lets it in. Consumer.mu, bufferAccount.mu,
// Producer.inFlight and metadataCache.mu are leaves. GroupConsumer: commitMu (held across an
// OffsetCommit round trip, never while a callback runs) before GroupConsumer.mu before
// Consumer.mu; groupCoordinator.mu is a leaf. No lock is held while a callback runs, nor, apart
// from commitMu, while waiting on the network.
package client
