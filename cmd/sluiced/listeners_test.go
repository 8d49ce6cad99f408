package main

import (
	"io"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/listener"
)

func TestListenerFlags(t *testing.T) {
	opts, err := parseFlags([]string{"--listeners", "CLIENT://0.0.0.0:9092,internal://127.0.0.1:9093",
		"--listener-security-protocol-map", "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
		"--advertised-listeners", "CLIENT://broker.example:9092", "--inter-broker-listener-name", "internal"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := opts.broker
	if len(b.Listeners) != 2 || b.Listeners[1] != (listener.Spec{Name: "INTERNAL", Protocol: listener.Plaintext, Address: "127.0.0.1:9093"}) ||
		b.AdvertisedListeners["CLIENT"] != "broker.example:9092" || b.InterBrokerListener != "INTERNAL" {
		t.Fatalf("parsed %+v %v %q", b.Listeners, b.AdvertisedListeners, b.InterBrokerListener)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listeners", "SSL://127.0.0.1:0"}, "TLS certificate"},
		{[]string{"--listeners", "A://127.0.0.1:0"}, "security protocol map"},
		{[]string{"--advertised-listeners", "A://h:1"}, "need --listeners"},
		{[]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--inter-broker-listener-name", "OTHER"}, "not a listener"},
		{[]string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--controller-voters", "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"}, "--inter-broker-sasl-user"},
		{[]string{"--tls-client-auth", "required", "--tls-cert", "c", "--tls-key", "k"}, "CA file"},
		{[]string{"--tls-client-auth", "always"}, "--tls-client-auth"},
	} {
		if _, err := parseFlags(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one mentioning %q", c.args, err, c.want)
		}
	}
}
