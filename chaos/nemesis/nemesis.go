package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/netproxy"
	"github.com/sluice-mq/sluice/localcluster"
)

// Config is what the nemesis acts on.
type Config struct {
	Cluster  *localcluster.Cluster
	Network  *netproxy.Network
	Recorder *history.Recorder
	// Topic: torn tails garble this topic's partitions.
	Topic string
	// FsyncFailFile is the file whose existence makes node's fsyncs fail (the sluiced test hook);
	// DiskDir the node's small filesystem to fill. Empty: that fault is not available.
	FsyncFailFile func(node int32) string
	DiskDir       func(node int32) string
	// AwaitHealthy waits until every replica is back in sync (after a torn tail).
	AwaitHealthy func(ctx context.Context) error
	// Log receives a line per action.
	Log io.Writer
}

// Nemesis runs a schedule.
type Nemesis struct {
	config Config
}

// New returns a nemesis.
func New(config Config) *Nemesis {
	if config.Log == nil {
		config.Log = io.Discard
	}
	return &Nemesis{config: config}
}

// Available reports whether a kind can run here, and why not.
func (n *Nemesis) Available(kind Kind) (bool, string) {
	nodes := len(n.config.Cluster.Nodes)
	switch kind {
	case FsyncFail:
		if n.config.FsyncFailFile == nil || n.config.FsyncFailFile(1) == "" {
			return false, "no fsync fault hook configured"
		}
	case DiskFull:
		if n.config.DiskDir == nil || n.config.DiskDir(1) == "" {
			return false, "data directories are not on small filesystems (mounting a tmpfs needs root)"
		}
	case Bridge, Split, OneWay, Isolate, RaftCut, ReplicationCut, KillMajority:
		if nodes < 3 {
			return false, "needs three nodes or more"
		}
	}
	return true, ""
}

// Run carries out faults, each at its start time after start, until the list ends or ctx is done;
// a fault under way when ctx ends is ended first.
func (n *Nemesis) Run(ctx context.Context, start time.Time, faults []Fault) error {
	var errs error
	for _, f := range faults {
		if !sleepUntil(ctx, start.Add(f.Start)) {
			break
		}
		end, err := n.begin(f)
		nodes := f.Unhealthy(len(n.config.Cluster.Nodes))
		n.config.Recorder.Record(history.Event{Process: "nemesis", F: history.FaultStart, Op: int64(f.Number), Fault: string(f.Kind), Nodes: nodes, Detail: f.String()})
		fmt.Fprintf(n.config.Log, "nemesis: start %s\n", f)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("nemesis: fault %s: %w", f, err))
		}
		sleepUntil(ctx, time.Now().Add(f.Duration))
		detail, err := end()
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("nemesis: end of fault %s: %w", f, err))
			detail += " (error: " + err.Error() + ")"
		}
		n.config.Recorder.Record(history.Event{Process: "nemesis", F: history.FaultEnd, Op: int64(f.Number), Fault: string(f.Kind), Nodes: nodes, Detail: detail})
		fmt.Fprintf(n.config.Log, "nemesis: end #%d %s %s\n", f.Number, f.Kind, detail)
		if ctx.Err() != nil {
			break
		}
	}
	return errs
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// begin starts a fault and returns the function that ends it (with a note of what it did).
func (n *Nemesis) begin(f Fault) (func() (string, error), error) {
	c := n.config.Cluster
	none := func() (string, error) { return "", nil }
	switch f.Kind {
	case Kill, KillMajority:
		for _, id := range f.Nodes {
			c.Node(id).Kill()
		}
		return func() (string, error) { return "restarted", n.startNodes(f.Nodes) }, nil
	case Pause:
		c.Node(f.Nodes[0]).Pause()
		return func() (string, error) { c.Node(f.Nodes[0]).Resume(); return "resumed", nil }, nil
	case Isolate, Split:
		n.setPolicy(cutBetween(func(a, b int32) bool { return slices.Contains(f.Nodes, a) != slices.Contains(f.Nodes, b) }, nil))
	case OneWay:
		victim := f.Nodes[0]
		n.setPolicy(func(from, to netproxy.Peer, _ netproxy.Service) netproxy.Effect {
			return netproxy.Effect{Blocked: from == netproxy.NodePeer(victim) && to.Role == netproxy.Node && to.ID != victim}
		})
	case Bridge:
		middle, half := f.Nodes[0], f.Nodes[1:]
		n.setPolicy(cutBetween(func(a, b int32) bool {
			if a == middle || b == middle {
				return false
			}
			return slices.Contains(half, a) != slices.Contains(half, b)
		}, nil))
	case RaftCut, ReplicationCut:
		service := netproxy.Raft
		if f.Kind == ReplicationCut {
			service = netproxy.Kafka
		}
		victim := f.Nodes[0]
		n.setPolicy(cutBetween(func(a, b int32) bool { return (a == victim) != (b == victim) }, &service))
	case ClientCut:
		client := netproxy.ClientPeer(f.Client)
		n.setPolicy(func(from, to netproxy.Peer, _ netproxy.Service) netproxy.Effect {
			return netproxy.Effect{Blocked: from == client || to == client}
		})
	case Slow, Throttle:
		victim := netproxy.NodePeer(f.Nodes[0])
		effect := netproxy.Effect{Delay: f.Delay, BytesPerSecond: f.BytesPerSecond}
		n.setPolicy(func(from, to netproxy.Peer, _ netproxy.Service) netproxy.Effect {
			if from == victim || to == victim {
				return effect
			}
			return netproxy.Effect{}
		})
	case Flaky:
		return n.flaky(f), nil
	case FsyncFail:
		path := n.config.FsyncFailFile(f.Nodes[0])
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return none, err
		}
		return func() (string, error) {
			os.Remove(path)
			c.Node(f.Nodes[0]).Kill()
			return "fsyncs work again; node restarted", n.startNodes(f.Nodes)
		}, nil
	case DiskFull:
		filler := filepath.Join(n.config.DiskDir(f.Nodes[0]), "chaos-filler")
		err := fill(filler)
		return func() (string, error) { return "filler removed", os.Remove(filler) }, err
	case TornTail:
		node := c.Node(f.Nodes[0])
		node.Kill()
		return func() (string, error) {
			torn, err := TearTails(filepath.Join(node.DataDir, "topics"), n.config.Topic+"-", f.Seed)
			detail := fmt.Sprintf("torn: %v", torn)
			if err != nil {
				return detail, err
			}
			if err := n.startNodes(f.Nodes); err != nil {
				return detail, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if n.config.AwaitHealthy != nil {
				if err := n.config.AwaitHealthy(ctx); err != nil {
					return detail, fmt.Errorf("replicas not back in sync after the torn tail: %w", err)
				}
			}
			return detail + "; restarted and back in sync", nil
		}, nil
	default:
		return none, fmt.Errorf("nemesis: unknown fault %q", f.Kind)
	}
	return func() (string, error) { n.setPolicy(nil); return "healed", nil }, nil
}

func (n *Nemesis) setPolicy(policy netproxy.Policy) { n.config.Network.SetPolicy(policy) }

// cutBetween blocks node-to-node links (of service, if given) for which cut(from, to) holds.
func cutBetween(cut func(a, b int32) bool, service *netproxy.Service) netproxy.Policy {
	return func(from, to netproxy.Peer, s netproxy.Service) netproxy.Effect {
		if from.Role != netproxy.Node || to.Role != netproxy.Node || (service != nil && s != *service) {
			return netproxy.Effect{}
		}
		return netproxy.Effect{Blocked: cut(from.ID, to.ID)}
	}
}

// startNodes starts nodes together (a killed majority needs each other to serve), retrying a
// start that fails.
func (n *Nemesis) startNodes(ids []int32) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := n.config.Cluster.Node(id)
			for attempt := range 3 {
				if node.Running() {
					return
				}
				if errs[i] = node.Start(); errs[i] == nil {
					return
				}
				fmt.Fprintf(n.config.Log, "nemesis: start of node %d failed (attempt %d): %v\n", id, attempt+1, errs[i])
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// flaky drops the node's connections now and again until the fault ends.
func (n *Nemesis) flaky(f Fault) func() (string, error) {
	victim := netproxy.NodePeer(f.Nodes[0])
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(f.Seed, 1))
		dropped := 0
		for {
			dropped += n.config.Network.Drop(func(from, to netproxy.Peer, _ netproxy.Service) bool { return from == victim || to == victim })
			timer := time.NewTimer(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
			select {
			case <-timer.C:
			case <-stop:
				timer.Stop()
				done <- dropped
				return
			}
		}
	}()
	return func() (string, error) {
		close(stop)
		return fmt.Sprintf("%d connections dropped", <-done), nil
	}
}

// fill takes all but a little of the free space of path's filesystem.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("nemesis: %w", err)
	}
	defer f.Close()
	// The node keeps writing between statfs and fallocate: when the space went meanwhile, measure
	// again and take what is left.
	var allocated int64
	for attempt := 0; attempt < 8; attempt++ {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
			return fmt.Errorf("nemesis: statfs: %w", err)
		}
		size := int64(st.Bavail)*int64(st.Bsize) - 16<<10
		if size <= 0 {
			return nil
		}
		err := unix.Fallocate(int(f.Fd()), 0, allocated, size)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("nemesis: fill %s: %w", path, err)
		}
		if info, statErr := f.Stat(); statErr == nil {
			allocated = info.Size()
		}
	}
	return nil
}

// Heal undoes every fault that may still hold: network policy, paused or stopped nodes, fault
// files. Safe to call at any time.
func (n *Nemesis) Heal() error {
	n.setPolicy(nil)
	var stopped []int32
	for _, node := range n.config.Cluster.Nodes {
		if n.config.FsyncFailFile != nil {
			if path := n.config.FsyncFailFile(node.ID); path != "" {
				os.Remove(path)
			}
		}
		if n.config.DiskDir != nil {
			if dir := n.config.DiskDir(node.ID); dir != "" {
				os.Remove(filepath.Join(dir, "chaos-filler"))
			}
		}
		node.Resume()
		if !node.Running() {
			stopped = append(stopped, node.ID)
		}
	}
	return n.startNodes(stopped)
}

// SetAwaitHealthy sets Config.AwaitHealthy (known only once the cluster runs).
func (n *Nemesis) SetAwaitHealthy(await func(ctx context.Context) error) {
	n.config.AwaitHealthy = await
}
