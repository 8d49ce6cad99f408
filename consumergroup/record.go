package consumergroup

import (
	"encoding/json"
	"fmt"
	"time"
)

// record is a group's durable form (JSON, version 1). Deadlines are not kept: a loaded group
// gives every member a fresh session.
type record struct {
	Version          int                    `json:"version"`
	Epoch            int32                  `json:"epoch"`
	AssignmentEpoch  int32                  `json:"assignmentEpoch"`
	SubscribedTopics string                 `json:"subscribedTopics,omitempty"`
	Members          []memberRecord         `json:"members,omitempty"`
	Target           map[string]assignments `json:"target,omitempty"`
}

type memberRecord struct {
	ID                string        `json:"id"`
	InstanceID        string        `json:"instanceID,omitempty"`
	RackID            string        `json:"rackID,omitempty"`
	ClientID          string        `json:"clientID,omitempty"`
	ClientHost        string        `json:"clientHost,omitempty"`
	SubscribedNames   []string      `json:"subscribedNames,omitempty"`
	SubscribedRegex   string        `json:"subscribedRegex,omitempty"`
	ServerAssignor    string        `json:"serverAssignor,omitempty"`
	RebalanceTimeout  time.Duration `json:"rebalanceTimeout,omitempty"`
	Epoch             int32         `json:"epoch"`
	PreviousEpoch     int32         `json:"previousEpoch"`
	State             MemberState   `json:"state"`
	Assigned          assignments   `json:"assigned,omitempty"`
	PendingRevocation assignments   `json:"pendingRevocation,omitempty"`
	Left              bool          `json:"left,omitempty"`
}

// assignments is an Assignment in JSON (topic ids as keys need a string form).
type assignments []topicAssignment

type topicAssignment struct {
	TopicID    [16]byte `json:"topicID"`
	Partitions []int32  `json:"partitions"`
}

func toRecord(a Assignment) assignments {
	var out assignments
	for id, ps := range a {
		if len(ps) > 0 {
			out = append(out, topicAssignment{id, ps})
		}
	}
	return out
}

func (a assignments) assignment() Assignment {
	out := Assignment{}
	for _, t := range a {
		out[t.TopicID] = t.Partitions
	}
	return out
}

// Record encodes the durable form and clears Dirty.
func (g *Group) Record() []byte {
	g.dirty = false
	r := record{Version: 1, Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, SubscribedTopics: g.subscribedTopics, Target: map[string]assignments{}}
	for _, view := range g.Members() {
		m := view.Member
		r.Members = append(r.Members, memberRecord{ID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID, ClientID: m.ClientID,
			ClientHost: m.ClientHost, SubscribedNames: m.SubscribedNames, SubscribedRegex: m.SubscribedRegex,
			ServerAssignor: m.ServerAssignor, RebalanceTimeout: m.RebalanceTimeout, Epoch: m.Epoch, PreviousEpoch: m.PreviousEpoch,
			State: m.State, Assigned: toRecord(m.Assigned), PendingRevocation: toRecord(m.PendingRevocation), Left: m.Left})
	}
	for id, a := range g.target {
		r.Target[id] = toRecord(a)
	}
	body, err := json.Marshal(r)
	if err != nil {
		panic("consumergroup: record does not encode: " + err.Error())
	}
	return body
}

// Load rebuilds a group from its durable form; every member's session (and pending revocation)
// starts afresh at now.
func Load(id string, config Config, body []byte, now time.Time) (*Group, error) {
	var r record
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("consumergroup: group %q: record: %w", id, err)
	}
	if r.Version != 1 || r.AssignmentEpoch > r.Epoch {
		return nil, fmt.Errorf("consumergroup: group %q: record version %d, epochs %d/%d", id, r.Version, r.AssignmentEpoch, r.Epoch)
	}
	g := New(id, config)
	g.epoch, g.assignmentEpoch, g.subscribedTopics = r.Epoch, r.AssignmentEpoch, r.SubscribedTopics
	for _, m := range r.Members {
		member := &Member{ID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SubscribedNames: m.SubscribedNames, SubscribedRegex: m.SubscribedRegex, ServerAssignor: m.ServerAssignor,
			RebalanceTimeout: m.RebalanceTimeout, Epoch: m.Epoch, PreviousEpoch: m.PreviousEpoch, State: m.State,
			Assigned: m.Assigned.assignment(), PendingRevocation: m.PendingRevocation.assignment(), Left: m.Left,
			sessionDeadline: now.Add(config.SessionTimeout)}
		if member.State == UnrevokedPartitions {
			timeout := member.RebalanceTimeout
			if timeout <= 0 {
				timeout = config.SessionTimeout
			}
			member.revokeDeadline = now.Add(timeout)
		}
		member.sentAssignment = member.Assigned.Clone()
		g.members[m.ID] = member
	}
	for id, a := range r.Target {
		g.target[id] = a.assignment()
	}
	return g, nil
}
