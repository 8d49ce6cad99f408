package listener

import (
	"errors"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	specs, err := Parse("client://0.0.0.0:9092, INTERNAL://127.0.0.1:9093,SSL://[::1]:9094", "CLIENT:sasl_ssl,INTERNAL:SSL")
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{
		{Name: "CLIENT", Protocol: SASLSSL, Address: "0.0.0.0:9092"},
		{Name: "INTERNAL", Protocol: SSL, Address: "127.0.0.1:9093"},
		{Name: "SSL", Protocol: SSL, Address: "[::1]:9094"},
	}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("parsed %+v", specs)
	}
	if !SASLSSL.TLS() || !SASLSSL.SASL() || Plaintext.TLS() || Plaintext.SASL() || !SSL.TLS() || !SASLPlaintext.SASL() {
		t.Fatal("protocol predicates")
	}
	for _, bad := range [][2]string{
		{"CLIENT://0.0.0.0:9092", ""},         // not named after a protocol, no map entry
		{"PLAINTEXT://0.0.0.0", ""},           // no port
		{"PLAINTEXT://:1,PLAINTEXT://:2", ""}, // twice
		{"0.0.0.0:9092", ""},                  // no name
		{"A://:1", "A:TLS"},                   // unknown protocol
		{"A://:1", "A:SSL,B:SSL"},             // map names a non-listener
		{"A://:1", "A"},                       // malformed entry
	} {
		if _, err := Parse(bad[0], bad[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
	names, addresses, err := ParseEndpoints("A://h:1,b://h:2")
	if err != nil || FormatEndpoints(names, addresses) != "A://h:1,B://h:2" {
		t.Fatalf("round trip: %v %v %v", names, addresses, err)
	}
}

func TestParseClientAuth(t *testing.T) {
	for text, want := range map[string]ClientAuth{"": ClientAuthNone, "NONE": ClientAuthNone, "requested": ClientAuthRequested, "Required": ClientAuthRequired} {
		if got, err := ParseClientAuth(text); err != nil || got != want {
			t.Errorf("ParseClientAuth(%q) = %v, %v", text, got, err)
		}
	}
	if _, err := ParseClientAuth("sometimes"); err == nil {
		t.Error("sometimes accepted")
	}
	if err := (Files{CertFile: "c"}).Validate(); err == nil {
		t.Error("certificate without key accepted")
	}
	if err := (Files{CertFile: "c", KeyFile: "k", ClientAuth: ClientAuthRequired}).Validate(); err == nil {
		t.Error("required client auth without CA accepted")
	}
}
