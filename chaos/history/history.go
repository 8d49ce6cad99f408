// Package history is the chaos suite's record of a run: every operation a client invoked and how
// it completed, every fault the nemesis started and ended, and, after the run, a digest of each
// replica's log. It is written as JSON lines while the run goes, so that a run that dies still
// leaves its history, and read back by the checker (which never sees the cluster itself).
//
// An operation is two events sharing Process and Op: an invoke, then exactly one completion of
// type ok (it happened), fail (it certainly did not) or info (unknown: timed out, connection
// lost). Times are nanoseconds since the run started, from one monotonic clock.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Type is the kind of an event.
type Type string

const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Function names of operations and other events.
const (
	Send       = "send"        // produce one record
	Poll       = "poll"        // records read by a consumer (a completion only: Records)
	Commit     = "commit"      // a group member commits Offsets
	Committed  = "committed"   // a monitor's OffsetFetch of the group (Offsets)
	FinalRead  = "final-read"  // after healing: the whole partition, in order (Records)
	GroupDrain = "group-drain" // after healing: what a group member read to catch up (Records)
	Admin      = "admin"       // topic create/delete, partitions, configs (Detail)
	FaultStart = "fault-start" // nemesis (Fault, Nodes, Detail)
	FaultEnd   = "fault-end"
	Replica    = "replica" // a stopped node's log digest of one partition (Node, Partition, Batches)
	Phase      = "phase"   // run phases: "faults", "heal", "final"
)

// Record is one record as read: where it was and its value.
type Record struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

// Batch is a replica's batch as stored: enough to tell byte-identical copies apart.
type Batch struct {
	BaseOffset  int64  `json:"base"`
	LastOffset  int64  `json:"last"`
	Length      int32  `json:"len"`
	LeaderEpoch int32  `json:"epoch"`
	CRC         uint32 `json:"crc"` // CRC-32C of every byte of the batch as stored
}

// Event is one line of the history.
type Event struct {
	Time    int64  `json:"t"`              // ns since the run started
	Process string `json:"proc"`           // "producer-1", "reader-2", "member-3", "nemesis", ...
	Type    Type   `json:"type,omitempty"` // operations only
	F       string `json:"f"`
	Op      int64  `json:"op,omitempty"` // operation number within the process

	Topic      string          `json:"topic,omitempty"`
	Partition  int32           `json:"p,omitempty"`
	Offset     int64           `json:"o,omitempty"`
	Key        string          `json:"key,omitempty"`
	Value      string          `json:"v,omitempty"`
	Idempotent bool            `json:"idem,omitempty"`
	Records    []Record        `json:"records,omitempty"`
	Offsets    map[int32]int64 `json:"offsets,omitempty"`
	Error      string          `json:"err,omitempty"`

	Fault   string  `json:"fault,omitempty"`
	Nodes   []int32 `json:"nodes,omitempty"` // nodes a fault makes unhealthy
	Detail  string  `json:"detail,omitempty"`
	Node    int32   `json:"node,omitempty"`
	Batches []Batch `json:"batches,omitempty"`
}

// blockEvents is how many events one block of a Recorder's memory holds.
const blockEvents = 4096

// Recorder appends events to a JSON-lines file, or without a file keeps them in memory. It is safe
// for concurrent use; events are stamped and written in the order Record is called.
//
// A run's recorder writes only to its file (read it back with Read): a 30-minute run records over
// a million events, several hundred megabytes that the runner's garbage collector would otherwise
// scan over and over while the cluster shares the cores. In memory, events are kept in fixed-size
// blocks, never in one growing slice: growing one copies every event while the lock is held, and
// every client and the nemesis record through this lock; such copies froze a whole run's workload
// for up to 4 s, which the checker reported as unavailability of the cluster.
type Recorder struct {
	start    time.Time
	inMemory bool // no file: events are kept in blocks
	mu       struct {
		sync.Mutex
		out    *bufio.Writer
		file   io.Closer
		blocks [][]Event // each with capacity blockEvents; only the last is not full
		err    error
	}
}

// NewRecorder writes to path (created or truncated); an empty path keeps events in memory instead.
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now(), inMemory: path == ""}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.mu.file = f
		r.mu.out = bufio.NewWriterSize(f, 256<<10)
	}
	return r, nil
}

// Since is the run clock: time since the recorder started.
func (r *Recorder) Since() int64 { return int64(time.Since(r.start)) }

// Start is when the run began (wall clock).
func (r *Recorder) Start() time.Time { return r.start }

// Record stamps e (unless it carries a time already) and appends it; it returns the stamp.
func (r *Recorder) Record(e Event) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Time == 0 {
		e.Time = r.Since()
	}
	if r.inMemory {
		r.keepLocked(e)
		return e.Time
	}
	if r.mu.out != nil && r.mu.err == nil {
		line, err := json.Marshal(e)
		if err == nil {
			line = append(line, '\n')
			_, err = r.mu.out.Write(line)
		}
		r.mu.err = err
	}
	return e.Time
}

// keepLocked appends e to the in-memory blocks.
func (r *Recorder) keepLocked(e Event) {
	if last := len(r.mu.blocks) - 1; last < 0 || len(r.mu.blocks[last]) == blockEvents {
		r.mu.blocks = append(r.mu.blocks, make([]Event, 0, blockEvents))
	}
	last := len(r.mu.blocks) - 1
	r.mu.blocks[last] = append(r.mu.blocks[last], e)
}

// Events returns a copy of the events kept in memory (none for a recorder with a file).
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := make([]Event, 0, len(r.mu.blocks)*blockEvents)
	for _, block := range r.mu.blocks {
		events = append(events, block...)
	}
	return events
}

// Flush writes buffered lines to the file.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.out != nil && r.mu.err == nil {
		r.mu.err = r.mu.out.Flush()
	}
	return r.mu.err
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	err := r.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.file != nil {
		err = errors.Join(err, r.mu.file.Close())
		r.mu.file, r.mu.out = nil, nil
	}
	return err
}

// Read parses a JSON-lines history.
func Read(in io.Reader) ([]Event, error) {
	var events []Event
	decoder := json.NewDecoder(bufio.NewReaderSize(in, 256<<10))
	for {
		var e Event
		if err := decoder.Decode(&e); err == io.EOF {
			return events, nil
		} else if err != nil {
			return events, fmt.Errorf("history: event %d: %w", len(events)+1, err)
		}
		events = append(events, e)
	}
}
