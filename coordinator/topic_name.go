package coordinator

import "fmt"

// ConsumerOffsetsTopic is the internal topic that will hold consumer group
// offsets. Users may not create, delete or repartition it.
const ConsumerOffsetsTopic = "__consumer_offsets"

// maxTopicNameLength is Kafka's limit: 249 characters.
const maxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic name rules: non-empty, at most 249
// characters, only ASCII letters, digits, '.', '_' and '-', and neither "."
// nor "..". Errors wrap ErrInvalidTopicName.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidTopicName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopicName, name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("%w: name is %d characters long, the limit is %d", ErrInvalidTopicName, len(name), maxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !isTopicNameByte(name[i]) {
			return fmt.Errorf("%w: %q contains %q; only [a-zA-Z0-9._-] are allowed", ErrInvalidTopicName, name, name[i])
		}
	}
	return nil
}

// IsInternalTopicName reports whether name is reserved for an internal topic.
func IsInternalTopicName(name string) bool {
	return name == ConsumerOffsetsTopic
}

func isTopicNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}
