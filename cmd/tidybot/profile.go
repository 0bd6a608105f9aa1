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
// their files.
func (m *Main) profile(cfg Config) error {
	if err := m.record("TIDYBOT_CPU_PROFILE", cfg.CPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile); err != nil {
		return err
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
