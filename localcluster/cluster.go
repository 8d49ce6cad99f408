package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config describes a cluster to start.
type Config struct {
	// Binary is the sluiced executable (Build makes one).
	Binary string
	// Dir holds one data directory per node (node1, node2, ...).
	Dir string
	// Nodes is the number of nodes (voters). Invariant: >= 1.
	Nodes int
	// Args are extra sluiced flags given to every node.
	Args []string
	// Logs, if set, receives every node's log lines prefixed with its id.
	Logs io.Writer
	// StartTimeout bounds how long a node may take to serve (default 60 s).
	StartTimeout time.Duration
}

// Cluster is a running local cluster.
type Cluster struct {
	config Config
	Nodes  []*Node // Nodes[i].ID == i+1

	// reserved holds the nodes' ports bound from New until the first StartAll, so that a listener
	// the caller opens in between on an ephemeral port (a fault proxy) cannot be given one of them.
	reserved []net.Listener
}

// Node is one sluiced process slot: its ports and data survive restarts.
type Node struct {
	ID      int32
	DataDir string
	Kafka   string // host:port of the Kafka listener
	Raft    string // host:port of the Raft transport
	HTTP    string // host:port of /metrics and /readyz

	// KafkaAdvertise and RaftAdvertise, when set (before the node starts), are the addresses the
	// other nodes and clients are given instead of Kafka and Raft: a fault proxy in front of the
	// listener, say. Invariant: set on every node or on none (Voters uses them).
	KafkaAdvertise string
	RaftAdvertise  string
	// Args and Env are extra sluiced flags and environment entries ("NAME=value") for this node
	// alone, read at each start.
	Args []string
	Env  []string

	cluster *Cluster
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan error // receives the exit of the current process, once
	log     strings.Builder
	paused  bool
}

// Build compiles sluiced from the module at moduleDir into dir and returns the binary's path.
func Build(moduleDir, dir string) (string, error) {
	binary := filepath.Join(dir, "sluiced")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/sluiced")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("localcluster: build sluiced: %w\n%s", err, out)
	}
	return binary, nil
}

// reservePorts binds n distinct ports on 127.0.0.1 and returns the listeners holding them; the
// caller closes them just before the nodes bind (the broker sets SO_REUSEADDR). The ports come from
// below the kernel's ephemeral range where it leaves room (clusterPorts): a port from that range,
// released for the node to bind, could be taken meanwhile as the source port of any outgoing
// connection on the machine, and a node restarted after a kill binds its ports again much later.
// Another process could still take a port in between, which shows as a start failure, not as a
// silent mix-up.
func reservePorts(n int) ([]net.Listener, error) {
	listeners := make([]net.Listener, 0, n)
	low, high := clusterPorts()
	span, start := high-low, 0
	if span > 0 {
		start = rand.IntN(span)
	}
	for tried := 0; len(listeners) < n; tried++ {
		fromRange := tried < span
		address := "127.0.0.1:0" // from the kernel once the range is used up
		if fromRange {
			address = fmt.Sprintf("127.0.0.1:%d", low+(start+tried)%span)
		}
		l, err := net.Listen("tcp", address)
		if err != nil {
			if fromRange {
				continue // taken: try the next one
			}
			releasePorts(listeners)
			return nil, fmt.Errorf("localcluster: reserve a port: %w", err)
		}
		listeners = append(listeners, l)
	}
	return listeners, nil
}

// clusterPorts is the range reservePorts draws from: from 20000 up to the start of the ephemeral
// range, or an empty range (ports from the kernel) when that leaves fewer than 1000.
func clusterPorts() (low, high int) {
	low, high = 20000, 32768 // Linux's default ephemeral range starts at 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(data)); len(fields) == 2 {
			if start, err := strconv.Atoi(fields[0]); err == nil {
				high = start
			}
		}
	}
	if high-low < 1000 {
		return 0, 0
	}
	return low, high
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago, from the same range as a
// cluster's ports, for a single broker that must keep its port across restarts.
func FreePort() (int, error) {
	reserved, err := reservePorts(1)
	if err != nil {
		return 0, err
	}
	defer releasePorts(reserved)
	return port(reserved[0]), nil
}

func releasePorts(listeners []net.Listener) {
	for _, l := range listeners {
		l.Close()
	}
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// Start starts every node and waits until each serves.
func Start(cfg Config) (*Cluster, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.StartAll(); err != nil {
		return nil, err
	}
	return c, nil
}

// New chooses every node's ports and data directory without starting anything, so that the
// caller can set per-node addresses, flags and environment before StartAll. The ports stay bound
// until StartAll (or Close), so listeners the caller opens meanwhile get other ports.
func New(cfg Config) (*Cluster, error) {
	if cfg.Nodes < 1 || cfg.Binary == "" || cfg.Dir == "" {
		return nil, errors.New("localcluster: config needs Binary, Dir and at least one node")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	reserved, err := reservePorts(3 * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	c := &Cluster{config: cfg, reserved: reserved}
	for i := range cfg.Nodes {
		c.Nodes = append(c.Nodes, &Node{
			ID:      int32(i + 1),
			DataDir: filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i+1)),
			Kafka:   fmt.Sprintf("127.0.0.1:%d", port(reserved[3*i])),
			Raft:    fmt.Sprintf("127.0.0.1:%d", port(reserved[3*i+1])),
			HTTP:    fmt.Sprintf("127.0.0.1:%d", port(reserved[3*i+2])),
			cluster: c,
		})
	}
	return c, nil
}

// StartAll starts every node that does not run and waits until each serves; on failure it kills
// them all.
func (c *Cluster) StartAll() error {
	releasePorts(c.reserved)
	c.reserved = nil
	// Voters wait for a majority before serving: start them all, then wait.
	errs := make(chan error, len(c.Nodes))
	started := 0
	for _, n := range c.Nodes {
		if n.Running() {
			continue
		}
		started++
		go func() { errs <- n.Start() }()
	}
	var startErr error
	for range started {
		startErr = errors.Join(startErr, <-errs)
	}
	if startErr != nil {
		c.Close()
		return startErr
	}
	return nil
}

// Voters is the --controller-voters value of the cluster.
func (c *Cluster) Voters() string {
	parts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		parts[i] = fmt.Sprintf("%d@%s", n.ID, n.RaftAddress())
	}
	return strings.Join(parts, ",")
}

// Bootstrap lists every node's advertised Kafka address.
func (c *Cluster) Bootstrap() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.KafkaAddress()
	}
	return out
}

// KafkaAddress is the Kafka address the node advertises (its listener unless KafkaAdvertise is
// set).
func (n *Node) KafkaAddress() string {
	if n.KafkaAdvertise != "" {
		return n.KafkaAdvertise
	}
	return n.Kafka
}

// RaftAddress is the Raft address the other voters dial (its listener unless RaftAdvertise is
// set).
func (n *Node) RaftAddress() string {
	if n.RaftAdvertise != "" {
		return n.RaftAdvertise
	}
	return n.Raft
}

// PID is the process id of the node's running process, 0 when it does not run.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Paused reports whether the node's process is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Node returns the node with id (1-based).
func (c *Cluster) Node(id int32) *Node { return c.Nodes[id-1] }

// Close kills every running node.
func (c *Cluster) Close() {
	releasePorts(c.reserved)
	c.reserved = nil
	for _, n := range c.Nodes {
		n.Kill()
	}
}

var servingLine = regexp.MustCompile(`msg="broker serving"`)

// Start starts the node's process (again) and waits until it serves.
func (n *Node) Start() error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("localcluster: node %d is already running", n.ID)
	}
	cfg := n.cluster.config
	args := []string{
		"--node-id", strconv.Itoa(int(n.ID)),
		"--data-dir", n.DataDir,
		"--listen", n.Kafka,
		"--raft-listen", n.Raft,
		"--http", n.HTTP,
		"--controller-voters", n.cluster.Voters(),
		"--log-level", "info",
	}
	if n.KafkaAdvertise != "" {
		args = append(args, "--advertise", n.KafkaAdvertise)
	}
	args = append(args, cfg.Args...)
	args = append(args, n.Args...)
	cmd := exec.Command(cfg.Binary, args...)
	if len(n.Env) > 0 {
		cmd.Env = append(os.Environ(), n.Env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		n.mu.Unlock()
		return err
	}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("localcluster: start node %d: %w", n.ID, err)
	}
	exited := make(chan error, 1)
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.log.Reset()
	n.mu.Unlock()

	serving := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for scanner.Scan() {
			line := scanner.Text()
			n.mu.Lock()
			if n.log.Len() < 4<<20 {
				n.log.WriteString(line + "\n")
			}
			n.mu.Unlock()
			if cfg.Logs != nil {
				fmt.Fprintf(cfg.Logs, "[node%d] %s\n", n.ID, line)
			}
			if !signalled && servingLine.MatchString(line) {
				signalled = true
				close(serving)
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	select {
	case <-serving:
		return nil
	case err := <-exited:
		n.mu.Lock()
		n.cmd = nil
		n.mu.Unlock()
		return fmt.Errorf("localcluster: node %d exited before serving: %v\n%s", n.ID, err, n.Logs())
	case <-time.After(cfg.StartTimeout):
		n.Kill()
		return fmt.Errorf("localcluster: node %d did not serve within %v\n%s", n.ID, cfg.StartTimeout, n.Logs())
	}
}

// Running reports whether the node's process runs (paused counts as running).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Logs returns what the current (or last) process logged.
func (n *Node) Logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

// Kill sends SIGKILL (after SIGCONT if paused) and waits for the process to go.
func (n *Node) Kill() { n.signalAndWait(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to timeout for a clean exit, then sends SIGQUIT (a goroutine
// dump in the node's log) and kills. It returns the exit error of a process that did not exit
// cleanly.
func (n *Node) Stop(timeout time.Duration) error { return n.signalAndWait(syscall.SIGTERM, timeout) }

// quitGrace is how long a node that ignored SIGTERM gets to write its goroutine dump.
const quitGrace = 5 * time.Second

func (n *Node) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	cmd.Process.Signal(sig)
	var err error
	if timeout > 0 {
		select {
		case err = <-exited:
		case <-time.After(timeout):
			// SIGQUIT makes the Go runtime print every goroutine's stack to the node's log
			// before it exits: what the node was stuck on.
			cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(quitGrace):
				cmd.Process.Signal(syscall.SIGKILL)
				<-exited
			}
			err = fmt.Errorf("localcluster: node %d did not exit within %v of %v (its goroutines are in its log)", n.ID, timeout, sig)
		}
	} else {
		err = <-exited
	}
	n.mu.Lock()
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	if sig == syscall.SIGKILL {
		return nil
	}
	return err
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (n *Node) Pause() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.paused {
		n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	}
}

// Resume continues a paused process.
func (n *Node) Resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// Restart kills the node if it runs and starts it again with its data.
func (n *Node) Restart() error {
	n.Kill()
	return n.Start()
}

// RemoveData deletes the node's data directory (only while it is stopped).
func (n *Node) RemoveData() error {
	if n.Running() {
		return fmt.Errorf("localcluster: node %d runs", n.ID)
	}
	return os.RemoveAll(n.DataDir)
}
