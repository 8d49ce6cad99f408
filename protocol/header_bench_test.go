package protocol_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func BenchmarkParseRequest(b *testing.B) {
	clientID := "benchmark-client"
	for _, version := range []int16{8, 12} { // Metadata: header v1, header v2
		request := kmsg.NewPtrMetadataRequest()
		request.SetVersion(version)
		frame := kmsgFrame(b, request, 1, &clientID)
		b.Run(fmt.Sprintf("Metadata-v%d", version), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, _, err := protocol.ParseRequest(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendResponseHeader(b *testing.B) {
	header := protocol.RequestHeader{APIKey: 1, APIVersion: 12, CorrelationID: 1}
	buffer := make([]byte, 0, 16)
	b.ReportAllocs()
	b.SetBytes(5)
	for b.Loop() {
		buffer = protocol.AppendResponseHeader(buffer[:0], header)
	}
}
