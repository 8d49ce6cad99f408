package protocol_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func TestValidClientSoftware(t *testing.T) {
	check := func(s string, want bool) {
		t.Helper()
		if got := protocol.ValidClientSoftware(s); got != want {
			t.Errorf("ValidClientSoftware(%q) = %v, want %v", s, got, want)
		}
	}
	// What real clients send.
	check("kgo", true)
	check("v1.22.3", true)
	check("librdkafka", true)
	check("2.0.2", true)
	check("sarama", true)
	check("apache-kafka-java", true)
	check("3.7.0-SNAPSHOT", true)
	// The edges of the rule.
	check("a", true)
	check("9", true)
	check("a-b.c", true)
	check("a--..b", true)
	check("", false)
	check("-", false)
	check(".", false)
	check("-a", false)
	check("a-", false)
	check(".a", false)
	check("a.", false)
	check("a b", false)
	check("a_b", false)
	check("a/b", false)
	check("a+b", false)
	check("é", false)
	check("aé1", false)
	check("a\x00b", false)
}

func TestValidateApiVersionsRequest(t *testing.T) {
	check := func(version int16, name, softwareVersion string, want int16) {
		t.Helper()
		request := kmsg.NewPtrApiVersionsRequest()
		request.SetVersion(version)
		request.ClientSoftwareName, request.ClientSoftwareVersion = name, softwareVersion
		if got := protocol.CodeFor(protocol.ValidateApiVersionsRequest(request)); got != want {
			t.Errorf("v%d %q %q: code %d, want %d", version, name, softwareVersion, got, want)
		}
	}
	check(2, "", "", 0) // before v3 the fields do not exist
	check(3, "kgo", "v1.22.3", 0)
	check(4, "librdkafka", "2.0.2", 0)
	check(3, "", "1.0", 42)
	check(3, "kgo", "", 42)
	check(3, "kgo ", "1", 42)
	check(4, "kgo", "1.0-", 42)
}
