package main

import (
	"bytes"
	"strings"
	"testing"
)

// A go test -json stream (Go 1.26's format, abridged): one package with
// a passing test, a skipped one and a failed one, and one without tests.
const stream = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestPass"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"example/a","Test":"TestPass","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestDocker"}
{"Action":"output","Package":"example/a","Test":"TestDocker","Output":"=== RUN   TestDocker\n"}
{"Action":"output","Package":"example/a","Test":"TestDocker","Output":"    a_test.go:20: no Docker daemon: the image is checked by TestDockerfile only\n"}
{"Action":"output","Package":"example/a","Test":"TestDocker","Output":"--- SKIP: TestDocker (0.01s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestDocker","Elapsed":0.01}
{"Action":"run","Package":"example/a","Test":"TestBroken"}
{"Action":"output","Package":"example/a","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"example/a","Test":"TestBroken","Output":"    a_test.go:30: got 1, want 2\n"}
{"Action":"output","Package":"example/a","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}
{"Action":"fail","Package":"example/a","Test":"TestBroken","Elapsed":0}
{"Action":"output","Package":"example/a","Output":"FAIL\n"}
{"Action":"output","Package":"example/a","Output":"FAIL\texample/a\t0.02s\n"}
{"Action":"fail","Package":"example/a","Elapsed":0.02}
{"Action":"output","Package":"example/b","Output":"?   \texample/b\t[no test files]\n"}
{"Action":"skip","Package":"example/b","Elapsed":0}
`

func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("a failed test is not reported as a failure")
	}
	got := out.String()
	for _, want := range []string{"a_test.go:30: got 1, want 2", "--- FAIL: TestBroken", "FAIL\texample/a\t0.02s", "?   \texample/b\t[no test files]",
		"1 skipped:\n  example/a TestDocker: a_test.go:20: no Docker daemon: the image is checked by TestDockerfile only\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"chatter of a passing test", "=== RUN"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q (go test without -json hides it):\n%s", unwanted, got)
		}
	}
	if strings.Contains(got, "example/b TestDocker") || strings.Count(got, "skipped") != 1 {
		t.Errorf("a package without tests is not a skipped test:\n%s", got)
	}
}

func TestSummarizePassing(t *testing.T) {
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(`{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p","Elapsed":0.01}
`), &out)
	if err != nil || failed || out.String() != "ok  \tp\t0.01s\n" {
		t.Errorf("failed=%v err=%v output %q", failed, err, out.String())
	}
}

// TestSummarizeShowsWhyAPackageFailed: a package can fail with every
// test passed (a data race or a panic reported once its test had
// ended, attributed to that test by go test -json): its output is shown,
// or the log says FAIL with no reason.
func TestSummarizeShowsWhyAPackageFailed(t *testing.T) {
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestA","Output":"WARNING: DATA RACE\n"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p","Elapsed":0.01}
`), &out)
	if err != nil || !failed || !strings.Contains(out.String(), "WARNING: DATA RACE") || !strings.Contains(out.String(), "(output of p TestA)") {
		t.Errorf("failed=%v err=%v output %q", failed, err, out.String())
	}
}

// TestRunKeepsTheExitStatus runs go test for real on a package that
// fails to build: the status is go test's, not 0.
func TestRunKeepsTheExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-count=1", "./testdata/nosuchpackage"}, &out, &errOut); code == 0 {
		t.Errorf("exit status 0 for a package that does not exist\n%s\n%s", out.String(), errOut.String())
	}
}
