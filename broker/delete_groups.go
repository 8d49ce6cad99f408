package broker

// DeleteGroups v0-v2: deletes groups without members (emptied ones included), with their committed offsets (one Raft entry
// for all the request's groups). Per group: members present NON_EMPTY_GROUP; neither members state
// nor offsets GROUP_ID_NOT_FOUND; empty id INVALID_GROUP_ID; not the metadata leader
// COORDINATOR_NOT_AVAILABLE (NOT_COORDINATOR if leadership is lost during the change).

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

// groupDeleteTimeout bounds the Raft change of a DeleteGroups or OffsetDelete request.
const groupDeleteTimeout = 10 * time.Second

func (b *Broker) handleDeleteGroups(r *request, req *kmsg.DeleteGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	offsets := b.coordinator.Offsets()
	coordinatorErr := b.checkCoordinator
	errs := make([]error, len(req.Groups))
	var deletable []string
	var deletableIndexes []int
	for i, id := range req.Groups {
		switch {
		case id == "":
			errs[i] = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
			continue
		case coordinatorErr(id) != nil:
			errs[i] = coordinatorErr(id)
			continue
		}
		var answer error
		err := b.groups.with(id, false, func(_ *groupEntry, g *group.Group, _ time.Time) group.Outcome {
			answer = g.Delete()
			return group.Outcome{}
		})
		switch {
		case protocol.CodeFor(err) == protocol.GroupIDNotFound.Code && offsets.Group(id) != nil:
		case err != nil:
			errs[i] = err
			continue
		case answer != nil:
			errs[i] = answer
			continue
		}
		deletable = append(deletable, id)
		deletableIndexes = append(deletableIndexes, i)
	}
	if len(deletable) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), groupDeleteTimeout)
		err := b.coordinator.DeleteGroupOffsets(ctx, deletable)
		cancel()
		if err != nil {
			for _, i := range deletableIndexes {
				errs[i] = fmt.Errorf("broker: delete offsets: %w", protocol.ErrorCodeOf(groupCommitErrorCode(err)))
			}
		}
	}
	for i, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, protocol.CodeFor(errs[i])
		if rg.ErrorCode != 0 {
			r.failed()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	r.respond(resp)
}
