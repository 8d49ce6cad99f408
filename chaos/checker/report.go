package checker

import (
	"fmt"
	"io"
	"time"
)

// WriteSummary prints the counts, the availability figures and the anomalies, for people.
func (v Verdict) WriteSummary(w io.Writer) {
	c := v.Counts
	fmt.Fprintf(w, "operations %d; sends %d: acknowledged %d (idempotent %d), failed %d, indeterminate %d\n",
		c.Operations, c.Sends, c.Acknowledged, c.AckedIdempotent, c.FailedSends, c.UnknownSends)
	fmt.Fprintf(w, "records read %d; final log %d records; group commits %d; faults %d\n", c.Read, c.FinalRecords, c.Commits, c.Faults)
	fmt.Fprintf(w, "lost %d, duplicated %d (non-idempotent duplicates, allowed: %d), phantom %d, gaps %d, reordered %d, inconsistent reads %d\n",
		c.Lost, c.Duplicated, c.DuplicatedPlain, c.Phantom, c.Gaps, c.Reordered, c.InconsistentRead)
	fmt.Fprintf(w, "diverged %d, group offsets backwards %d, group missed %d, unavailable intervals over the limit %d\n",
		c.Diverged, c.OffsetBackwards, c.GroupMissed, c.Unavailable)
	fmt.Fprintf(w, "longest unavailability with a healthy majority: %v from %s (any partition); %v on partition %d from %s\n",
		v.LongestUnavailable.Round(time.Millisecond), seconds(v.LongestUnavailableFrom),
		v.LongestPartitionUnavailable.Round(time.Millisecond), v.LongestPartition, seconds(v.LongestPartitionFrom))
	for _, s := range v.Incomplete {
		fmt.Fprintf(w, "not checked: %s\n", s)
	}
	for _, a := range v.Anomalies {
		fmt.Fprintf(w, "ANOMALY %s at %s..%s partition %d offset %d: %s\n", a.Kind, seconds(a.From), seconds(a.To), a.Partition, a.Offset, a.Detail)
		if len(a.Records) > 0 {
			fmt.Fprintf(w, "    records: %v\n", a.Records)
		}
		for _, f := range a.Faults {
			fmt.Fprintf(w, "    fault: %s\n", f)
		}
	}
	if v.Valid {
		fmt.Fprintln(w, "verdict: VALID")
	} else {
		fmt.Fprintln(w, "verdict: INVALID")
	}
}
