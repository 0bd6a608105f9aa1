package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// profile starts the CPU profile and the runtime trace that cfg asks for
// (TIDYBOT_CPU_PROFILE, TIDYBOT_TRACE); Close stops them and closes
// their files. With the CPU profile, Close also writes the heap
// allocations since the start (sampled, pprof's "allocs") beside it, in
// the file named like it with ".allocs" added (go tool pprof
// -sample_index=alloc_space reads it).
func (m *Main) profile(cfg Config) error {
	if err := m.record("TIDYBOT_CPU_PROFILE", cfg.CPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		allocs := cfg.CPUProfile + ".allocs"
		m.closers = append(m.closers, func() error {
			f, err := os.Create(allocs)
			if err != nil {
				return fmt.Errorf("TIDYBOT_CPU_PROFILE: %w", err)
			}
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				_ = f.Close()
				return fmt.Errorf("TIDYBOT_CPU_PROFILE: write %s: %w", allocs, err)
			}
			return f.Close()
		})
	}
	return m.record("TIDYBOT_TRACE", cfg.Trace, trace.Start, trace.Stop)
}

// record starts writing to the file at path (none when path is empty)
// and has Close stop it.
func (m *Main) record(setting, path string, start func(io.Writer) error, stop func()) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	if err := start(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", setting, err)
	}
	m.closers = append(m.closers, func() error { stop(); return f.Close() })
	return nil
}
