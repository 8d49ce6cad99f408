package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestSecurityConcurrently runs authenticated producers, failing logins and ACL changes at once
// (meant for -race): producers keep their grant throughout, and a principal whose grant comes and
// goes is either served or refused with TOPIC_AUTHORIZATION_FAILED, never anything else.
func TestSecurityConcurrently(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.Security = SecurityConfig{RequireSASL: true, PlainUsers: map[string]string{"admin": "a", "writer": "w", "flicker": "f"},
			SuperUsers: []string{"User:admin"}}
	})
	login := func(user, password string, opts ...kgo.Opt) *kgo.Client {
		c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String()), kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()),
			kgo.RequestRetries(0), kgo.DisableIdempotentWrite()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := login("admin", "a")
	aclFor := func(principal string) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
		return c
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = append(create.Creations, aclFor("User:writer"))
	if _, err := create.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	topics := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "t", 2, 1
	topics.Topics = append(topics.Topics, topic)
	if _, err := topics.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}

	metadata := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	metadata.Topics = append(metadata.Topics, mt)
	meta, err := metadata.RequestWith(ctx, admin)
	if err != nil || len(meta.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	topicID := meta.Topics[0].TopicID

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writer := login("writer", "w")
			for i := 0; i < 50; i++ {
				if err := writer.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(2)
	go func() { // the flicker principal's grant comes and goes
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			create := kmsg.NewPtrCreateACLsRequest()
			create.Creations = append(create.Creations, aclFor("User:flicker"))
			create.RequestWith(ctx, admin)
			del := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			f.Principal = kmsg.StringPtr("User:flicker")
			del.Filters = append(del.Filters, f)
			del.RequestWith(ctx, admin)
		}
	}()
	go func() { // wrong passwords
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			wrong := login("writer", "nope")
			wrong.Ping(ctx)
			wrong.Close()
		}
	}()
	flicker := login("flicker", "f")
	for range 30 {
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = 1, 5000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = "t", topicID // kgo sends the version it likes: name and id
		tp.Partitions = append(tp.Partitions, kmsg.NewProduceRequestTopicPartition())
		produce.Topics = append(produce.Topics, tp)
		resp, err := flicker.Broker(1).Request(ctx, produce)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode == 29 || p.ErrorCode == 0 || p.ErrorCode == 2 || p.ErrorCode == 87 { // refused, or past authorization
					continue
				}
				t.Errorf("flicker produce: code %d", p.ErrorCode)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer with a standing grant: %v", err)
	}
}
