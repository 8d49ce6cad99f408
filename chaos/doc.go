// Package chaos is sluice's Jepsen-style fault-injection suite (issue 11): it runs a real cluster
// of sluiced processes (localcluster) with every link routed through fault proxies (netproxy),
// drives client operations against it while a nemesis injects faults from a seeded schedule
// (nemesis), records every invocation and outcome (history), and judges the history afterwards
// (checker).
//
// # A run (Run)
//
//  1. Cluster: Config.Nodes nodes on 127.0.0.1. Each node's Kafka and Raft listeners sit behind a
//     proxy; the node advertises the proxy's address (--advertise, and the proxy address in
//     --controller-voters), so clients, replication fetchers and Raft peers all go through the
//     proxies. When disk-full faults are drawn and tmpfs can be mounted (root), each node's data
//     directory is a small tmpfs; otherwise that fault is reported as not available.
//  2. Topic Config.Topic with Config.Partitions partitions, replication factor 3 and
//     min.insync.replicas=2.
//  3. Workload (workload.go, admin.go), each client bound to its own loopback address so that a
//     fault can cut one client: producers with acks=all at Config.Rate records/s each, keyed over
//     the partitions, alternately idempotent and not, every value unique; readers assigned every
//     partition from the start; group members that poll, commit every second (and on revocation)
//     and leave after about Config.MemberLifetime for a new member to join; a monitor reading the
//     group's committed offsets twice a second; an admin client creating, reconfiguring, growing
//     and deleting throwaway topics and changing a config of the topic under test.
//  4. Faults for Config.Duration (nemesis.Schedule from Config.Seed).
//  5. Heal: every fault undone, every node running, all replicas back in the ISR; then the
//     producers stop (their outstanding records complete or fail).
//  6. Final read of every partition to its high watermark; a group member drains the group to the
//     end; every node is stopped cleanly and its replicas are read with the segment package and
//     digested batch by batch.
//  7. checker.Check over the history; results written to Config.Dir.
//
// The broker side needs nothing from the suite except two test-only hooks, both off unless an
// environment variable is set (cmd/sluiced/test_hooks.go): a failing fsync (segment/fault_hook.go)
// and a deliberately broken acks=all (replication/unsafe_ack.go) that the package's tests use to
// prove the checker fails.
//
// Every goroutine the run starts (workload clients, nemesis, progress) is stopped and awaited
// before Run returns; the cluster, proxies and mounts are torn down by Run.
package chaos
