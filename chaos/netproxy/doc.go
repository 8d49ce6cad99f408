// Package netproxy is the chaos suite's network: a TCP proxy on loopback in front of every
// listener of every node (Kafka and Raft), which forwards each connection byte for byte unless the
// nemesis's current policy says otherwise for that link.
//
// # Telling links apart
//
// A fault such as "cut only the replication links of node 2" or "node 1 cannot reach node 3, but
// node 3 can reach node 1" needs, for every accepted connection, the peer that dialed it. All
// nodes dial from 127.0.0.1, so the source address alone does not say which node it is. The proxy
// asks the kernel instead: the dialer's socket is the row of /proc/net/tcp whose local address is
// the accepted connection's remote address and whose remote address is the proxy's listener; its
// inode names a file descriptor in exactly one process, found under /proc/PID/fd (see procfs.go).
// Clients of the suite run in the suite's own process and bind their sockets to 127.0.1.C, which
// names client C without a lookup.
//
// This needs no change to sluiced at all: every connection a node opens to another node, whatever
// the code that opens it (replication fetchers, Raft, forwarded controller calls, anything added
// later), is seen and attributed, with no flag to remember. The alternatives were a hidden flag
// binding each node's outbound sockets to 127.0.0.N (one dial site per package to change, and a new
// dial site silently escapes the faults) or one proxy listener per (source, destination) pair (but
// a node learns its peers' Kafka addresses from cluster metadata, which is the same for every
// node). The price is Linux: /proc and any user may read its own processes' fds. Network
// namespaces and iptables would need root and are not used.
//
// # What a fault does to a link
//
// The policy maps (from, to, service) to an Effect for the bytes flowing from -> to:
//   - Blocked: the bytes are held, not delivered (a partition drops packets; TCP retransmits in
//     vain). The proxy keeps reading a bounded amount so that it notices the sender giving up: a
//     connection whose sender closes while blocked is torn down (a partition that lets a FIN or
//     RST through), otherwise connections abandoned during a partition would pile up in the proxy.
//     When the block lifts, the held bytes are delivered in order.
//   - Delay: each chunk is delivered no earlier than Delay after it was read.
//   - BytesPerSecond: delivery is paced to this rate.
//
// A one-way cut blocks from -> to and not to -> from: requests get through one way only. Drop
// closes matching connections at once (a reset); new connections are still accepted.
//
// # Ownership
//
// Network owns every proxy; each proxy owns its accept goroutine and, per connection, one
// goroutine per direction reading and one writing, all stopped and awaited by Network.Close.
// Policy changes wake blocked writers through a channel closed and replaced on each change.
package netproxy
