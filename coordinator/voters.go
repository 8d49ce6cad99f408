package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Voter is one member of the Raft voter set: a node id and the Raft address
// the other nodes dial (which also carries forwarded calls).
type Voter struct {
	NodeID      int32  `json:"nodeID"`
	RaftAddress string `json:"raftAddress"`
}

// ParseVoters parses Kafka's controller.quorum.voters syntax,
// "1@host:port,2@host:port", into a voter list sorted by node id. An empty
// string gives no voters.
func ParseVoters(text string) ([]Voter, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var voters []Voter
	for _, entry := range strings.Split(text, ",") {
		entry = strings.TrimSpace(entry)
		idText, address, found := strings.Cut(entry, "@")
		if !found {
			return nil, fmt.Errorf("coordinator: voter %q is not id@host:port", entry)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("coordinator: voter %q: node id %q is not a number", entry, idText)
		}
		voters = append(voters, Voter{NodeID: int32(id), RaftAddress: address})
	}
	slices.SortFunc(voters, func(a, b Voter) int { return cmp.Compare(a.NodeID, b.NodeID) })
	if err := validateVoters(voters); err != nil {
		return nil, err
	}
	return voters, nil
}

// validateVoters checks Config.Voters' invariant.
func validateVoters(voters []Voter) error {
	seen := map[int32]bool{}
	for _, voter := range voters {
		if voter.NodeID < 0 {
			return fmt.Errorf("coordinator: config: voter node id %d is negative", voter.NodeID)
		}
		if seen[voter.NodeID] {
			return fmt.Errorf("coordinator: config: voter node id %d is listed twice", voter.NodeID)
		}
		seen[voter.NodeID] = true
		host, portText, err := net.SplitHostPort(voter.RaftAddress)
		if err != nil {
			return fmt.Errorf("coordinator: config: voter %d address %q: %w", voter.NodeID, voter.RaftAddress, err)
		}
		port, err := strconv.Atoi(portText)
		if host == "" || err != nil || port < 1 || port > 65535 {
			return fmt.Errorf("coordinator: config: voter %d address %q needs a host and a port in 1..65535",
				voter.NodeID, voter.RaftAddress)
		}
	}
	return nil
}

// ownVoter returns this node's entry in Voters, if it has one.
func (c Config) ownVoter() (Voter, bool) {
	for _, voter := range c.Voters {
		if voter.NodeID == c.NodeID {
			return voter, true
		}
	}
	return Voter{}, false
}

// isNonVoter reports whether this node joins a voter set it is not part of.
func (c Config) isNonVoter() bool {
	_, isVoter := c.ownVoter()
	return len(c.Voters) > 0 && !isVoter
}

// votersConfiguration is the Raft configuration every voter bootstraps:
// identical on every node, as hashicorp/raft requires for a multi-node
// bootstrap.
func votersConfiguration(voters []Voter) raft.Configuration {
	sorted := slices.SortedFunc(slices.Values(voters), func(a, b Voter) int { return cmp.Compare(a.NodeID, b.NodeID) })
	var configuration raft.Configuration
	for _, voter := range sorted {
		configuration.Servers = append(configuration.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raftServerID(voter.NodeID),
			Address:  raft.ServerAddress(voter.RaftAddress),
		})
	}
	return configuration
}

// joinArgs asks the controller to add a node as a non-voter. ClusterID is
// the cluster the node's data dir belongs to ("" for a new node); the
// controller refuses a node from another cluster.
type joinArgs struct {
	NodeID    int32  `json:"nodeID"`
	Address   string `json:"address"`
	ClusterID string `json:"clusterID,omitempty"`
}

// join makes this non-voter a member of the Raft configuration: it asks the
// voters in turn (the controller answers, the others say ErrNotLeader) until
// one adds it or ctx ends. Joining again with the same address changes
// nothing; with a new address (an ephemeral port) it updates the entry.
func (c *Coordinator) join(ctx context.Context) error {
	args := joinArgs{NodeID: c.config.NodeID, Address: c.RaftAddress()}
	var err error
	if args.ClusterID, err = readClusterIDFile(c.config.DataDir); err != nil {
		return err
	}
	backoff := retryBackoffMin
	var lastErr error
	for attempt := 0; ; attempt++ {
		targets := make([]string, 0, len(c.config.Voters)+1)
		if leader, _ := c.raft.LeaderWithID(); leader != "" {
			targets = append(targets, string(leader))
		}
		for _, voter := range c.config.Voters {
			targets = append(targets, voter.RaftAddress)
		}
		for _, target := range targets {
			_, lastErr = c.forwardTo(ctx, target, opJoin, args, nil)
			if lastErr == nil {
				c.logger.Info("coordinator: joined the cluster as a non-voter", "node", c.config.NodeID, "via", target)
				return nil
			}
			if !retriable(lastErr) {
				return lastErr
			}
		}
		if !c.pause(ctx, backoff) {
			return fmt.Errorf("%w: joining the cluster through voters %v: %w", ErrTimeout, c.config.Voters, lastErr)
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// addNonVoter serves a join on the controller.
func (c *Coordinator) addNonVoter(ctx context.Context, args joinArgs) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	if clusterID := c.Metadata().ClusterID; args.ClusterID != "" && args.ClusterID != clusterID {
		return struct{}{}, fmt.Errorf("%w: node %d's data dir belongs to cluster %s, this cluster is %s",
			ErrClusterMismatch, args.NodeID, args.ClusterID, clusterID)
	}
	if args.NodeID < 0 || args.Address == "" {
		return struct{}{}, fmt.Errorf("%w: join of node %d at %q", ErrInvalidBroker, args.NodeID, args.Address)
	}
	future := c.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return struct{}{}, fmt.Errorf("coordinator: read raft configuration: %w", mapRaftError(err))
	}
	id, address := raftServerID(args.NodeID), raft.ServerAddress(args.Address)
	for _, server := range future.Configuration().Servers {
		if server.ID != id {
			continue
		}
		if server.Suffrage == raft.Voter {
			return struct{}{}, fmt.Errorf("%w: node %d is a voter and cannot join as a non-voter", ErrInvalidBroker, args.NodeID)
		}
		if server.Address == address {
			return struct{}{}, nil
		}
	}
	timeout := c.config.ApplyTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if err := c.raft.AddNonvoter(id, address, 0, timeout).Error(); err != nil {
		return struct{}{}, fmt.Errorf("coordinator: add non-voter %d at %s: %w", args.NodeID, address, mapRaftError(err))
	}
	c.logger.Info("coordinator: added a non-voter", "node", args.NodeID, "raft_address", address)
	return struct{}{}, nil
}
