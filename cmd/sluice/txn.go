package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const txnHelp = `Usage: sluice txn <list|describe> [arguments] [flags]

Transactions (transactional producers), as their coordinators know them.

  sluice txn list [--state Ongoing,...]   every transactional id: state and producer id
  sluice txn describe ID...               state, producer id and epoch, timeout, open for, partitions

Run "sluice txn <subcommand> --help" for its flags.
`

func runTxn(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("txn", args, []string{"list", "describe"}, io, txnHelp)
	if err != nil {
		return err
	}
	if verb == "list" {
		return txnList(ctx, rest, io)
	}
	return txnDescribe(ctx, rest, io)
}

type txnRow struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
}

func txnList(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice txn list", "[flags]", "List transactional ids (ListTransactions, asked of every broker).")
	var states stringList
	fs.Var(&states, "state", "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable")
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = states
	shards := s.raw.RequestSharded(rctx, req)
	rows := []txnRow{}
	for _, shard := range shards {
		if shard.Err != nil {
			return fmt.Errorf("list transactions on node %d: %w", shard.Meta.NodeID, shard.Err)
		}
		resp := shard.Resp.(*kmsg.ListTransactionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("list transactions on node %d: %w", shard.Meta.NodeID, err)
		}
		for _, t := range resp.TransactionStates {
			rows = append(rows, txnRow{t.TransactionalID, t.TransactionState, t.ProducerID})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].TransactionalID < rows[j].TransactionalID })
	if fs.globals.json {
		return writeJSON(io.out, rows)
	}
	t := newTable(io.out, "transactional id", "state", "producer id")
	for _, r := range rows {
		t.row(r.TransactionalID, r.State, r.ProducerID)
	}
	return t.flush()
}

type txnDescription struct {
	TransactionalID string               `json:"transactional_id"`
	State           string               `json:"state"`
	ProducerID      int64                `json:"producer_id"`
	ProducerEpoch   int16                `json:"producer_epoch"`
	TimeoutMillis   int32                `json:"timeout_ms"`
	StartTimestamp  int64                `json:"start_timestamp"` // -1: no transaction open
	Partitions      []txnTopicPartitions `json:"partitions"`
}

type txnTopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func txnDescribe(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice txn describe", "ID... [flags]", "Describe transactional ids (DescribeTransactions, asked of each id's coordinator).")
	ids, err := fs.parse(args, io.out, 1, -1)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	resp, err := req.RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("describe transactions: %w", err)
	}
	out := []txnDescription{}
	for _, state := range resp.TransactionStates {
		if state.ErrorCode == kerr.TransactionalIDNotFound.Code {
			return &notFoundError{fmt.Sprintf("transactional id %q is not known (see sluice txn list)", state.TransactionalID)}
		}
		if err := kerr.ErrorForCode(state.ErrorCode); err != nil {
			return fmt.Errorf("describe transaction %s: %w", state.TransactionalID, err)
		}
		d := txnDescription{TransactionalID: state.TransactionalID, State: state.State, ProducerID: state.ProducerID,
			ProducerEpoch: state.ProducerEpoch, TimeoutMillis: state.TimeoutMillis, StartTimestamp: state.StartTimestamp, Partitions: []txnTopicPartitions{}}
		for _, topic := range state.Topics {
			d.Partitions = append(d.Partitions, txnTopicPartitions{topic.Topic, topic.Partitions})
		}
		out = append(out, d)
	}
	if fs.globals.json {
		return writeJSON(io.out, out)
	}
	t := newTable(io.out, "transactional id", "state", "producer id", "epoch", "timeout", "open for", "partitions")
	for _, d := range out {
		openFor := "-"
		if d.StartTimestamp >= 0 {
			openFor = time.Since(time.UnixMilli(d.StartTimestamp)).Round(time.Millisecond).String()
		}
		partitions := ""
		for i, p := range d.Partitions {
			if i > 0 {
				partitions += " "
			}
			partitions += p.Topic + ":" + int32List(p.Partitions)
		}
		if partitions == "" {
			partitions = "-"
		}
		t.row(d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, time.Duration(d.TimeoutMillis)*time.Millisecond, openFor, partitions)
	}
	return t.flush()
}
