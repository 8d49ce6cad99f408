package broker

import (
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/coordinator"
)

// BenchmarkTopicName measures resolving a Produce/Fetch v13+ topic id: a map lookup once the index
// of the current snapshot exists, rebuilt only when the registry publishes a new snapshot.
func BenchmarkTopicName(b *testing.B) {
	for _, topics := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			r := &registry{}
			snapshot := make(map[string]*topicState, topics)
			ids := make([][16]byte, topics)
			for i := range topics {
				ids[i] = [16]byte{byte(i), byte(i >> 8), 1}
				name := fmt.Sprintf("topic-%d", i)
				snapshot[name] = &topicState{meta: &coordinator.Topic{Name: name, ID: ids[i]}}
			}
			r.topics.Store(&snapshot)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, ok := r.topicName(ids[i%topics]); !ok {
					b.Fatal("id not found")
				}
			}
		})
	}
}
