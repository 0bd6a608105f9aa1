package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cfsPeriod is the scheduling period of a CPU quota: in each, a limited
// group runs for at most its quota (the kernel's default period, the
// one Kubernetes sets a CPU limit with).
const cfsPeriod = 100 * time.Millisecond

// limitCPU puts process pid (every thread of it) into a control group of
// its own whose CPU time is limited to cpus cores, as a container's CPU
// limit does (Kubernetes `resources.limits.cpu`): a quota of cpus times
// the period in each 100 ms period (cgroup v2 cpu.max, or v1's
// cpu.cfs_quota_us). At the test's end the process, if it still runs,
// goes back to the root group and the group is removed. It skips the
// test, saying why, where no cgroup file system with the cpu controller
// is writable (not root, or none mounted).
func limitCPU(t testing.TB, pid int, cpus float64) {
	t.Helper()
	quota := int64(cpus * float64(cfsPeriod.Microseconds()))
	if quota < 1000 {
		t.Fatalf("a CPU limit of %v cores is below the kernel's least quota (1 ms a period)", cpus)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	dir, err := makeCPUGroup("tidybot-bench-"+hex.EncodeToString(b), quota)
	if err != nil {
		t.Skipf("cannot limit a replica's CPU (needs root and a cgroup file system with the cpu controller, v2 at /sys/fs/cgroup or v1 at /sys/fs/cgroup/cpu): %v", err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644) // ended: nothing to move
		if err := os.Remove(dir); err != nil {
			t.Logf("remove the control group %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("move serve %d into the control group %s: %v", pid, dir, err)
	}
}

// makeCPUGroup makes control group name with a CPU quota of quota µs a
// cfsPeriod, on cgroup v2 where it is mounted with the cpu controller,
// else on v1's cpu hierarchy, and returns its directory.
func makeCPUGroup(name string, quota int64) (string, error) {
	const v2, v1 = "/sys/fs/cgroup", "/sys/fs/cgroup/cpu"
	period := cfsPeriod.Microseconds()
	if raw, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(raw)), "cpu") {
		// The cpu controller must be enabled for the root's children.
		if err := os.WriteFile(filepath.Join(v2, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			return "", fmt.Errorf("enable cgroup v2's cpu controller: %w", err)
		}
		dir := filepath.Join(v2, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, period), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set cpu.max: %w", err)
		}
		return dir, nil
	}
	if _, err := os.Stat(filepath.Join(v1, "cpu.cfs_quota_us")); err != nil {
		return "", fmt.Errorf("no cgroup v2 cpu controller at %s and no v1 cpu hierarchy at %s: %w", v2, v1, err)
	}
	dir := filepath.Join(v1, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []struct {
		file  string
		value int64
	}{{"cpu.cfs_period_us", period}, {"cpu.cfs_quota_us", quota}} {
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(strconv.FormatInt(f.value, 10)), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set %s: %w", f.file, err)
		}
	}
	return dir, nil
}
