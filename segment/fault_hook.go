package segment

import "fmt"

// Config.FsyncFault is a fault hook for tests and the chaos suite (issue 11), off unless set: when
// it returns an error, the group-commit fdatasync it precedes fails with that error instead of
// running, exactly as a failing disk would make it fail (the log fails: ErrFailed). Production code
// never sets it; sluiced sets it only from a test-only environment variable.
func injectedFsyncFault(cfg *Config) error {
	if cfg.FsyncFault == nil {
		return nil
	}
	if err := cfg.FsyncFault(); err != nil {
		return fmt.Errorf("segment: injected fsync fault: %w", err)
	}
	return nil
}
