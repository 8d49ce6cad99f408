// Package nemesis is the chaos suite's fault injector: a schedule of faults drawn from a seed
// (schedule.go, pure: the same seed, duration, cluster size and fault kinds give the same
// schedule) and the code that starts and ends each fault on a live local cluster (nemesis.go)
// through its processes (localcluster), its network (netproxy) and its files (torn.go).
//
// Faults never overlap: each starts after the previous one ended, with a healthy pause between, so
// that a destructive fault (a torn tail destroys fsynced data on one node) never meets another
// one that would leave no intact copy. Each fault names the nodes it makes unhealthy; the checker
// measures availability only while a majority is not named.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

const (
	Kill           Kind = "kill"            // kill -9 one node, restart it at the end
	KillMajority   Kind = "kill-majority"   // kill -9 a majority, restart them at the end
	Pause          Kind = "pause"           // SIGSTOP one node, SIGCONT at the end
	Isolate        Kind = "isolate"         // cut one node from the other nodes (clients still reach it)
	Split          Kind = "split"           // a majority and a minority that cannot talk (5 nodes: 3|2)
	OneWay         Kind = "one-way"         // one node's outgoing node links cut, incoming kept
	Bridge         Kind = "bridge"          // two halves that each see a middle node only
	RaftCut        Kind = "raft-cut"        // only one node's Raft links cut
	ReplicationCut Kind = "replication-cut" // only one node's node-to-node Kafka links cut
	ClientCut      Kind = "client-cut"      // one client cut from every node
	Slow           Kind = "slow"            // added latency on every link of one node
	Throttle       Kind = "throttle"        // bandwidth limit on every link of one node
	Flaky          Kind = "flaky"           // one node's connections dropped again and again
	FsyncFail      Kind = "fsync-fail"      // one node's fsyncs fail (test hook); restarted at the end
	DiskFull       Kind = "disk-full"       // one node's data disk (a small tmpfs) filled up
	TornTail       Kind = "torn-tail"       // kill -9, garble the newest segments' tails, restart
)

// AllKinds lists every kind, in a fixed order.
var AllKinds = []Kind{Kill, KillMajority, Pause, Isolate, Split, OneWay, Bridge, RaftCut, ReplicationCut,
	ClientCut, Slow, Throttle, Flaky, FsyncFail, DiskFull, TornTail}

// ParseKinds reads a comma-separated list of kinds ("all" for every kind).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return slices.Clone(AllKinds), nil
	}
	var kinds []Kind
	for _, name := range strings.Split(s, ",") {
		kind := Kind(strings.TrimSpace(name))
		if !slices.Contains(AllKinds, kind) {
			return nil, fmt.Errorf("nemesis: unknown fault %q", name)
		}
		kinds = append(kinds, kind)
	}
	return kinds, nil
}

// Fault is one scheduled fault.
type Fault struct {
	Number   int           `json:"number"`
	Kind     Kind          `json:"kind"`
	Start    time.Duration `json:"start"` // since the run began
	Duration time.Duration `json:"duration"`
	// Nodes are the targets: the killed, paused, isolated, slowed node(s); for Split the minority;
	// for Bridge the middle node first, then one half.
	Nodes []int32 `json:"nodes"`
	// Client is ClientCut's target.
	Client int32 `json:"client,omitempty"`
	// Delay and BytesPerSecond for Slow and Throttle.
	Delay          time.Duration `json:"delay,omitempty"`
	BytesPerSecond int64         `json:"bytesPerSecond,omitempty"`
	// Seed drives the fault's own random choices (which bytes a torn tail garbles).
	Seed uint64 `json:"seed"`
}

func (f Fault) String() string {
	s := fmt.Sprintf("#%d %s at %v for %v nodes %v", f.Number, f.Kind, f.Start.Round(time.Millisecond), f.Duration.Round(time.Millisecond), f.Nodes)
	switch f.Kind {
	case ClientCut:
		s += fmt.Sprintf(" client c%d", f.Client)
	case Slow:
		s += fmt.Sprintf(" delay %v", f.Delay)
	case Throttle:
		s += fmt.Sprintf(" %d B/s", f.BytesPerSecond)
	}
	return s
}

// Unhealthy are the nodes the fault keeps from serving as part of a healthy, connected majority.
func (f Fault) Unhealthy(nodes int) []int32 {
	switch f.Kind {
	case ClientCut:
		return nil
	case Bridge:
		// Only the middle node sees everyone; count both halves as unhealthy.
		var out []int32
		for n := int32(1); n <= int32(nodes); n++ {
			if n != f.Nodes[0] {
				out = append(out, n)
			}
		}
		return out
	}
	return slices.Clone(f.Nodes)
}

// ScheduleConfig are the inputs of a schedule.
type ScheduleConfig struct {
	Seed     uint64
	Duration time.Duration // faults start and end within it
	Nodes    int
	Clients  int // clients ClientCut may pick (1..Clients)
	Kinds    []Kind
	// Warmup is the healthy time before the first fault; Gap the healthy time between faults
	// (drawn from [Gap, 2*Gap)); FaultTime the length of a fault (from [FaultTime/2, 3*FaultTime/2)).
	Warmup, Gap, FaultTime time.Duration
}

// Schedule draws the faults.
func Schedule(cfg ScheduleConfig) []Fault {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	if len(cfg.Kinds) == 0 || cfg.Nodes < 1 {
		return nil
	}
	between := func(low, high time.Duration) time.Duration {
		if high <= low {
			return low
		}
		return low + time.Duration(rng.Int64N(int64(high-low)))
	}
	nodes := make([]int32, cfg.Nodes)
	for i := range nodes {
		nodes[i] = int32(i + 1)
	}
	majority := cfg.Nodes/2 + 1
	var faults []Fault
	at := cfg.Warmup
	for {
		kind := cfg.Kinds[rng.IntN(len(cfg.Kinds))]
		length := between(cfg.FaultTime/2, cfg.FaultTime*3/2)
		if at+length > cfg.Duration {
			return faults
		}
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		f := Fault{Number: len(faults) + 1, Kind: kind, Start: at, Duration: length, Nodes: shuffled[:1], Seed: rng.Uint64()}
		switch kind {
		case KillMajority:
			f.Nodes = shuffled[:majority]
		case Split:
			f.Nodes = shuffled[:cfg.Nodes-majority]
		case Bridge:
			// Middle node, then one half; the other half is the rest.
			f.Nodes = shuffled[:1+(cfg.Nodes-1)/2]
		case ClientCut:
			f.Nodes = nil
			f.Client = int32(1 + rng.IntN(max(cfg.Clients, 1)))
		case Slow:
			f.Delay = between(20*time.Millisecond, 300*time.Millisecond).Round(time.Millisecond)
		case Throttle:
			f.BytesPerSecond = 64<<10 + rng.Int64N(448<<10)
		}
		slices.Sort(f.Nodes[min(1, len(f.Nodes)):])
		if kind != Bridge {
			slices.Sort(f.Nodes)
		}
		faults = append(faults, f)
		at += length + between(cfg.Gap, 2*cfg.Gap)
	}
}
