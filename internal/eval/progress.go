package eval

import (
	"fmt"
	"io"
	"os"
)

// PrintProgress returns an Options.Progress that prints to w (stderr)
// while the suite runs: one line rewritten in place on a terminal;
// elsewhere (a log, a pipe) a line per failed attempt and one at each
// tenth of the attempts, so a suite of 69 attempts is about ten lines,
// not 69. Called with a zero Progress, it ends the line.
func PrintProgress(w io.Writer) func(Progress) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return func(p Progress) {
		if p.Total == 0 {
			if tty {
				_, _ = io.WriteString(w, "\n")
			}
			return
		}
		verdict := "FAIL"
		if p.Pass {
			verdict = "pass"
		}
		line := fmt.Sprintf("eval: %d/%d attempts, %d passed; %s #%d %s", p.Done, p.Total, p.Passed, p.Task, p.Attempt, verdict)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
			return
		}
		if p.Pass && p.Done*10/p.Total == (p.Done-1)*10/p.Total && p.Done != p.Total {
			return // neither a failure nor a new tenth
		}
		fmt.Fprintln(w, line)
	}
}
