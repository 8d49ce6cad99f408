package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ValidClientSoftware reports whether s is acceptable as ApiVersions' ClientSoftwareName or
// ClientSoftwareVersion. Kafka's rule is the regular expression
//
//	[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
//
// matched against the whole string: non-empty, letters, digits, '-' and '.', starting and ending with
// a letter or digit.
func ValidClientSoftware(s string) bool {
	if s == "" || !isASCIIAlphanumeric(s[0]) || !isASCIIAlphanumeric(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isASCIIAlphanumeric(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isASCIIAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ValidateApiVersionsRequest applies Kafka's checks to a decoded ApiVersions request: from v3 on,
// the client software name and version must pass ValidClientSoftware. The error wraps
// InvalidRequest, so CodeFor gives 42; answer it with AppendApiVersionsResponse(..., CodeFor(err)).
func ValidateApiVersionsRequest(request *kmsg.ApiVersionsRequest) error {
	if request.Version < 3 {
		return nil
	}
	if !ValidClientSoftware(request.ClientSoftwareName) {
		return fmt.Errorf("protocol: ApiVersions client software name %q: %w", request.ClientSoftwareName, InvalidRequest)
	}
	if !ValidClientSoftware(request.ClientSoftwareVersion) {
		return fmt.Errorf("protocol: ApiVersions client software version %q: %w", request.ClientSoftwareVersion, InvalidRequest)
	}
	return nil
}
