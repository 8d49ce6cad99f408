package broker

// DescribeTransactions v0 (API 65), for operators: each named transactional id's state, producer id
// and epoch, timeout, start time (-1 when no transaction is open) and partitions. Per id: not this
// broker's NOT_COORDINATOR; unknown TRANSACTIONAL_ID_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleDescribeTransactions(r *request, req *kmsg.DescribeTransactionsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	transactions := b.coordinator.Transactions()
	for _, id := range req.TransactionalIDs {

		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.ProducerEpoch, s.StartTimestamp = id, -1, -1, -1
		_, found := transactions.Lookup(id)
		switch err := b.txns.checkOwner(id); {
		case err != nil:
			s.ErrorCode = protocol.CodeFor(err)
		case !found:
			s.ErrorCode = protocol.TransactionalIDNotFound.Code
		default:
			record, _ := b.txns.current(id) // a transaction whose markers are written reads as complete
			s.State, s.TimeoutMillis = record.State.String(), record.TimeoutMillis
			s.ProducerID, s.ProducerEpoch = record.ProducerID, record.ProducerEpoch
			if record.StartMillis > 0 {
				s.StartTimestamp = record.StartMillis
			}
			for _, p := range record.Partitions {
				if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != p.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = p.Topic
					s.Topics = append(s.Topics, t)
				}
				s.Topics[len(s.Topics)-1].Partitions = append(s.Topics[len(s.Topics)-1].Partitions, p.Partition)
			}
		}
		if s.ErrorCode != 0 {
			r.failed()
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	r.respond(resp)
}
