// Package localcluster runs a cluster of real sluiced processes on 127.0.0.1 for tests, the chaos
// suite and `make cluster`: each node with its own data directory and its own Kafka, Raft and HTTP
// ports, chosen once and kept across restarts so that a restarted node rejoins where it was.
//
// Nodes are numbered 1..N and are all Raft voters. Faults it can inject on a node: kill -9,
// SIGSTOP/SIGCONT, SIGTERM (clean shutdown), restart. Every goroutine it starts belongs to a node
// process and ends when that process exits; Close kills what still runs.
//
// New chooses ports without starting anything, so that a caller (the chaos suite) can put a fault
// proxy in front of each listener and set Node.KafkaAdvertise and Node.RaftAdvertise, and extra
// per-node flags or environment, before StartAll; Start does both at once.
package localcluster
