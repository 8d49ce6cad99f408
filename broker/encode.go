package broker

import "encoding/binary"

// Append helpers for the responses framed by hand (Fetch), in Kafka's encodings: fixed-width
// big-endian integers, and for flexible versions compact (uvarint length + 1) strings, arrays and
// bytes with tagged-field sections.

func appendInt16(dst []byte, v int16) []byte { return binary.BigEndian.AppendUint16(dst, uint16(v)) }
func appendInt32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func appendInt64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

func appendString(dst []byte, s string, compact bool) []byte {
	if compact {
		dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	} else {
		dst = appendInt16(dst, int16(len(s)))
	}
	return append(dst, s...)
}

// appendArrayLength writes an array length; n < 0 is a null array.
func appendArrayLength(dst []byte, n int, compact bool) []byte {
	if compact {
		return binary.AppendUvarint(dst, uint64(n+1))
	}
	return appendInt32(dst, int32(n))
}

// appendBytesLength writes the length prefix of a (nullable) bytes field; n < 0 is null.
func appendBytesLength(dst []byte, n int, compact bool) []byte {
	if compact {
		return binary.AppendUvarint(dst, uint64(n+1))
	}
	return appendInt32(dst, int32(n))
}

// appendNoTags writes an empty tagged-field section.
func appendNoTags(dst []byte, flexible bool) []byte {
	if flexible {
		return append(dst, 0)
	}
	return dst
}
