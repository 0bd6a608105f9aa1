// Command testsum runs go test with its arguments (make test: -race
// -count=1 ./...) and prints what go test prints (each package's result,
// the output of failed tests), then the tests that were skipped, each
// with its reason, which plain go test hides. It exits with go test's
// status.
//
//	go run ./cmd/testsum -race -count=1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs go test -json args and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testsum:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testsum: go test:", err)
		return 2
	}
	failed, serr := summarize(out, stdout)
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "testsum: go test:", err)
		return 2
	case serr != nil:
		fmt.Fprintln(stderr, "testsum: reading go test -json:", serr)
		return 2
	case failed:
		return 1
	}
	return 0
}

// event is one line of go test -json (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skip is a skipped test and why.
type skip struct {
	pkg, test, reason string
}

// summarize reads go test -json from r and writes to w what go test
// without -json would (package lines, failed tests' output, build
// errors), then the skipped tests with their reasons. It reports whether
// anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	buf := map[string][]string{} // package + test → its output so far
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not an event: pass it on
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			io.WriteString(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
					io.WriteString(w, e.Output)
				}
				continue
			}
			if !strings.HasPrefix(e.Output, "=== ") { // RUN, PAUSE, CONT: -v framing
				buf[key] = append(buf[key], e.Output)
			}
		case "fail":
			failed = true
			if e.Test != "" {
				io.WriteString(w, strings.Join(buf[key], ""))
				delete(buf, key)
				continue
			}
			// The package failed: what its tests wrote and no test's
			// end claimed (a race or a panic reported after a test
			// passed, a test still running when the binary died) is
			// why, so it is shown, test by test.
			var left []string
			for k := range buf {
				if strings.HasPrefix(k, e.Package+" ") {
					left = append(left, k)
				}
			}
			sort.Strings(left)
			for _, k := range left {
				fmt.Fprintf(w, "(output of %s)\n%s", k, strings.Join(buf[k], ""))
				delete(buf, k)
			}
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{pkg: e.Package, test: e.Test, reason: reason(buf[key])})
			}
			delete(buf, key)
		case "pass":
			delete(buf, key)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	if len(skips) > 0 {
		sort.Slice(skips, func(i, j int) bool {
			return skips[i].pkg+" "+skips[i].test < skips[j].pkg+" "+skips[j].test
		})
		fmt.Fprintf(w, "\n%d skipped:\n", len(skips))
		for _, s := range skips {
			fmt.Fprintf(w, "  %s %s: %s\n", s.pkg, s.test, s.reason)
		}
	}
	return failed, nil
}

// reason is what a skipped test logged, on one line, without go test's
// framing lines (=== RUN, --- SKIP).
func reason(output []string) string {
	var parts []string
	for _, line := range strings.Split(strings.Join(output, ""), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}
