package client

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// appendProduceFrame encodes a produce request frame (size prefix, header, body) for writev: the
// returned buffers alternate between encoded fields, built in scratch, and the record batches
// themselves, which are referenced, not copied. It writes exactly what kmsg's AppendTo writes for
// the same request and version (produce_encode_test checks this), for versions 3 to 11.
func appendProduceFrame(scratch []byte, header []byte, version int16, req *kmsg.ProduceRequest) (net.Buffers, []byte) {
	flexible := version >= 9
	// Fields are appended to scratch; cuts records where each batch goes between them. Slices
	// of scratch are taken only at the end, once it no longer moves.
	type cut struct {
		scratchEnd int
		batch      []byte
	}
	var cuts []cut
	scratch = append(scratch[:0], 0, 0, 0, 0) // size, filled in below
	scratch = append(scratch, header...)
	appendLength := func(n int) { // array or string length
		if flexible {
			scratch = binary.AppendUvarint(scratch, uint64(n)+1)
		} else {
			scratch = binary.BigEndian.AppendUint32(scratch, uint32(n))
		}
	}
	appendString := func(s string) {
		if flexible {
			scratch = binary.AppendUvarint(scratch, uint64(len(s))+1)
		} else {
			scratch = binary.BigEndian.AppendUint16(scratch, uint16(len(s)))
		}
		scratch = append(scratch, s...)
	}
	// transactional id: null
	if flexible {
		scratch = append(scratch, 0)
	} else {
		scratch = binary.BigEndian.AppendUint16(scratch, 0xFFFF)
	}
	scratch = binary.BigEndian.AppendUint16(scratch, uint16(req.Acks))
	scratch = binary.BigEndian.AppendUint32(scratch, uint32(req.TimeoutMillis))
	total := 0
	appendLength(len(req.Topics))
	for _, topic := range req.Topics {
		appendString(topic.Topic)
		appendLength(len(topic.Partitions))
		for _, partition := range topic.Partitions {
			scratch = binary.BigEndian.AppendUint32(scratch, uint32(partition.Partition))
			if flexible {
				scratch = binary.AppendUvarint(scratch, uint64(len(partition.Records))+1)
			} else {
				scratch = binary.BigEndian.AppendUint32(scratch, uint32(len(partition.Records)))
			}
			cuts = append(cuts, cut{len(scratch), partition.Records})
			total += len(partition.Records)
			if flexible {
				scratch = append(scratch, 0) // partition tagged fields
			}
		}
		if flexible {
			scratch = append(scratch, 0) // topic tagged fields
		}
	}
	if flexible {
		scratch = append(scratch, 0) // request tagged fields
	}
	binary.BigEndian.PutUint32(scratch, uint32(len(scratch)+total-4))
	buffers := make(net.Buffers, 0, 2*len(cuts)+1)
	start := 0
	for _, c := range cuts {
		buffers = append(buffers, scratch[start:c.scratchEnd], c.batch)
		start = c.scratchEnd
	}
	buffers = append(buffers, scratch[start:])
	return buffers, scratch
}
