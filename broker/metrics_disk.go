package broker

import (
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// writeDataDirMetrics writes the gauges of the partition log directory (one per broker; the label
// names it as DescribeLogDirs does, absolute):
//
//	sluice_data_dir_free_bytes{dir}      bytes an unprivileged writer can still use (statfs bavail)
//	sluice_data_dir_capacity_bytes{dir}  the file system's size
//	sluice_data_dir_log_bytes{dir}       bytes of the partition logs this broker holds
//	sluice_data_dir_segments{dir}        their segment files (each one open file and an index pair)
//
// Free and capacity are left out when statfs fails (the directory is gone): a missing series
// alerts as "absent", a made-up zero would alert as "disk full".
func (b *Broker) writeDataDirMetrics(w io.Writer, logBytes int64, segments int) {
	dir := b.registry.dir
	if absolute, err := filepath.Abs(dir); err == nil {
		dir = absolute
	}
	label := fmt.Sprintf("{dir=%q}", dir)
	var fs unix.Statfs_t
	if err := unix.Statfs(b.registry.dir, &fs); err == nil {
		fmt.Fprintf(w, "sluice_data_dir_free_bytes%s %d\n", label, int64(fs.Bavail)*int64(fs.Bsize))
		fmt.Fprintf(w, "sluice_data_dir_capacity_bytes%s %d\n", label, int64(fs.Blocks)*int64(fs.Bsize))
	}
	fmt.Fprintf(w, "sluice_data_dir_log_bytes%s %d\n", label, logBytes)
	fmt.Fprintf(w, "sluice_data_dir_segments%s %d\n", label, segments)
}
