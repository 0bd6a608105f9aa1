package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// profile starts the CPU profile and the runtime trace that cfg asks for
// (TIDYBOT_CPU_PROFILE, TIDYBOT_TRACE); Close stops them and closes
// their files.
func (m *Main) profile(cfg Config) error {
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("TIDYBOT_CPU_PROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("TIDYBOT_CPU_PROFILE: %w", err)
		}
		m.closers = append(m.closers, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if cfg.Trace != "" {
		f, err := os.Create(cfg.Trace)
		if err != nil {
			return fmt.Errorf("TIDYBOT_TRACE: %w", err)
		}
		if err := trace.Start(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("TIDYBOT_TRACE: %w", err)
		}
		m.closers = append(m.closers, func() error { trace.Stop(); return f.Close() })
	}
	return nil
}
