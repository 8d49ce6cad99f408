package batch

import "fmt"

// Scan walks the consecutive batches in b, validating each completely, and calls fn with each
// header and its bytes. It stops at the first batch that fails validation and returns the number of
// bytes of whole valid batches before it together with that error (nil when b ends exactly at a batch
// boundary). fn returning an error stops the scan with that error.
func Scan(b []byte, fn func(h Header, raw []byte) error) (valid int, err error) {
	for valid < len(b) {
		h, err := Validate(b[valid:])
		if err != nil {
			return valid, fmt.Errorf("batch at byte %d: %w", valid, err)
		}
		if fn != nil {
			if err := fn(h, b[valid:valid+h.Size()]); err != nil {
				return valid, err
			}
		}
		valid += h.Size()
	}
	return valid, nil
}
