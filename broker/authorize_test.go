package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every served API has an authorization rule (nil only where Kafka checks nothing), and no rule
// names an API the broker does not serve.
func TestEveryServedAPIHasAnAuthorizationRule(t *testing.T) {
	served := newAPITable().entries
	for key := range served {
		if _, ok := authorizationRules[key]; !ok {
			t.Errorf("%s (key %d) is served without an authorization rule", kmsg.NameForKey(key), key)
		}
	}
	for key, rule := range authorizationRules {
		if _, ok := served[key]; !ok {
			t.Errorf("rule for %s (key %d), which is not served", kmsg.NameForKey(key), key)
		}
		if rule == nil && key != 17 && key != 18 && key != 36 {
			t.Errorf("%s (key %d) has no check", kmsg.NameForKey(key), key)
		}
	}
}
