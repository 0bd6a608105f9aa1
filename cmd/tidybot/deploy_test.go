package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/tidybot/tidybot/web"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// finalStage returns the Dockerfile's last stage, one instruction a line
// (continuations joined), comments dropped.
func finalStage(dockerfile string) []string {
	var lines []string
	var cur string
	for _, l := range strings.Split(dockerfile, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		cur += l
		if strings.HasSuffix(cur, "\\") {
			cur = strings.TrimSuffix(cur, "\\") + " "
			continue
		}
		if strings.HasPrefix(strings.ToUpper(cur), "FROM ") {
			lines = nil
		}
		lines = append(lines, cur)
		cur = ""
	}
	return lines
}

// shutdownBudget is the longest tidybot takes to stop after SIGTERM.
const shutdownBudget = web.ShutdownWait + runGrace

func TestDockerfile(t *testing.T) {
	stage := finalStage(readRepoFile(t, "deploy/Dockerfile"))
	find := func(prefix string) []string {
		var out []string
		for _, l := range stage {
			if strings.HasPrefix(strings.ToUpper(l), prefix) {
				out = append(out, l)
			}
		}
		return out
	}
	users := find("USER ")
	if len(users) == 0 {
		t.Fatal("the image runs as root: no USER")
	}
	user := strings.Fields(users[len(users)-1])[1]
	uid, _, _ := strings.Cut(user, ":")
	if uid == "root" || uid == "0" {
		t.Errorf("USER %s is root", user)
	}
	// /data must exist in the image owned by that user, or a fresh
	// named volume is root-owned and the store cannot be created.
	owned := false
	for _, l := range stage {
		if (strings.HasPrefix(l, "COPY ") && strings.Contains(l, "--chown="+uid) && strings.HasSuffix(l, " /data")) ||
			(strings.HasPrefix(l, "RUN ") && strings.Contains(l, "chown") && strings.Contains(l, uid) && strings.Contains(l, "/data")) {
			owned = true
		}
	}
	if !owned {
		t.Errorf("/data is not created owned by user %s in the final stage", uid)
	}
	if v := find("VOLUME "); len(v) == 0 || !strings.Contains(v[0], "/data") {
		t.Errorf("VOLUME /data missing: %v", v)
	}
	hc := find("HEALTHCHECK ")
	if len(hc) == 0 || !regexp.MustCompile(`CMD \["/tidybot", ?"health"\]`).MatchString(hc[0]) {
		t.Errorf("HEALTHCHECK must run tidybot health: %v", hc)
	}
	for _, l := range find("EXPOSE ") {
		if strings.Contains(l, "9090") {
			t.Errorf("the metrics port is exposed: %s", l)
		}
	}
	for _, l := range find("ENV ") {
		if m := regexp.MustCompile(`TIDYBOT_METRICS_ADDR=(\S*)`).FindStringSubmatch(l); m != nil && m[1] != "" && !strings.HasPrefix(m[1], "127.0.0.1:") {
			t.Errorf("the image serves /metrics beyond loopback: %s", m[0])
		}
	}
	ignore := readRepoFile(t, ".dockerignore")
	for _, want := range []string{".git", "*.db", "*.env"} {
		if !strings.Contains(ignore, want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

func TestCompose(t *testing.T) {
	compose := readRepoFile(t, "deploy/compose.yaml")
	m := regexp.MustCompile(`(?m)^\s+stop_grace_period:\s*(\S+)`).FindStringSubmatch(compose)
	if m == nil {
		t.Fatal("compose.yaml has no stop_grace_period: Docker kills after 10 s")
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d <= shutdownBudget {
		t.Errorf("stop_grace_period %s, want more than tidybot's own %v", m[1], shutdownBudget)
	}
	inPorts := false
	for _, l := range strings.Split(compose, "\n") {
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "#") {
			continue
		}
		if strings.HasSuffix(trim, ":") && !strings.HasPrefix(trim, "-") {
			inPorts = trim == "ports:"
			continue
		}
		if inPorts && strings.HasPrefix(trim, "-") && strings.Contains(trim, "9090") {
			t.Errorf("compose publishes the metrics port: %s", trim)
		}
	}
	for _, want := range []string{"env_file: tidybot.env", "tidybot-data:/data", "host.docker.internal:host-gateway"} {
		if !strings.Contains(compose, want) {
			t.Errorf("compose.yaml lacks %s", want)
		}
	}
}

// TestComposeBuildsPassVersion: every image compose builds is given
// VERSION, so that tidybot --version says which build runs, not the
// Dockerfile's default.
func TestComposeBuildsPassVersion(t *testing.T) {
	arg := regexp.MustCompile(`(?m)^FROM [^\n]*\n(?:[^\n]*\n)*?ARG VERSION=(\S+)`).FindStringSubmatch(readRepoFile(t, "deploy/Dockerfile"))
	if arg == nil {
		t.Fatal("the Dockerfile takes no ARG VERSION")
	}
	for _, file := range []string{"deploy/compose.yaml", "deploy/compose.replicas.yaml"} {
		var c struct {
			Services map[string]struct {
				Build *struct {
					Args map[string]string `yaml:"args"`
				} `yaml:"build"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal([]byte(readRepoFile(t, file)), &c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		builds := 0
		for name, svc := range c.Services {
			if svc.Build == nil {
				continue
			}
			builds++
			if v := svc.Build.Args["VERSION"]; !strings.Contains(v, "${VERSION") {
				t.Errorf("%s: service %s builds with VERSION %q, want ${VERSION…} (else --version says %s)", file, name, v, arg[1])
			}
		}
		if builds == 0 {
			t.Errorf("%s builds no image", file)
		}
	}
}

func TestEnvExampleListsEverySetting(t *testing.T) {
	example := readRepoFile(t, "deploy/tidybot.env.example")
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Config{})) {
		name := f.Tag.Get("envconfig")
		if !regexp.MustCompile(`(?m)^#?` + name + `=`).MatchString(example) {
			t.Errorf("tidybot.env.example lacks %s", name)
		}
	}
	if !strings.Contains(example, "OPENAI_BASE_URL=http://host.docker.internal:11434/v1") {
		t.Error("tidybot.env.example lacks a model address reachable from a container")
	}
}

func TestSystemdUnit(t *testing.T) {
	unit := readRepoFile(t, "deploy/tidybot.service")
	for _, want := range []string{"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes", "DynamicUser=yes", "StateDirectory=tidybot",
		"CapabilityBoundingSet=\n", "RestrictAddressFamilies=", "SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes", "LockPersonality=yes",
		"RestrictNamespaces=yes", "ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectKernelLogs=yes", "ProtectControlGroups=yes",
		"ProtectClock=yes", "ProtectHostname=yes", "RestrictRealtime=yes", "RestrictSUIDSGID=yes", "PrivateDevices=yes", "UMask=0077"} {
		if !strings.Contains(unit, want) {
			t.Errorf("tidybot.service lacks %q", strings.TrimSpace(want))
		}
	}
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("no TimeoutStopSec")
	}
	v := m[1]
	if _, err := strconv.Atoi(v); err == nil {
		v += "s" // systemd reads a bare number as seconds
	}
	if d, err := time.ParseDuration(v); err != nil || d <= shutdownBudget {
		t.Errorf("TimeoutStopSec=%s, want more than tidybot's own %v", m[1], shutdownBudget)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: exposure score not checked")
		return
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", filepath.Join(root, "deploy/tidybot.service")).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for tidybot.service: ([0-9.]+)`).FindSubmatch(out)
	if score == nil {
		t.Logf("systemd-analyze security --offline=yes gave no score (%v): not checked\n%s", err, out)
		return
	}
	if s, _ := strconv.ParseFloat(string(score[1]), 64); s >= 4 {
		t.Errorf("systemd-analyze security: exposure %s, want under 4", score[1])
	} else {
		t.Logf("systemd-analyze security --offline=yes: exposure %s", score[1])
	}
}

// TestDockerImageBuilds builds the image when a Docker daemon answers
// and its base images are here or can be pulled.
func TestDockerImageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Docker image")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker command: the image is checked by TestDockerfile only")
	}
	if why := dockerSkip(t.Context(), docker, readRepoFile(t, "deploy/Dockerfile")); why != "" {
		t.Skip(why + ": the image is checked by TestDockerfile only")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	tag := "tidybot-test:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	build := exec.CommandContext(ctx, "docker", "build", "-f", "deploy/Dockerfile", "-t", tag, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() }()
	// The binary runs as the image's user and /data is writable by it.
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", tag, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "tidybot ") {
		t.Errorf("docker run version: %v\n%s", err, out)
	}
	vol := "tidybot-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer func() { _ = exec.Command("docker", "volume", "rm", "-f", vol).Run() }()
	// chat with empty stdin opens the store in /data and exits 0.
	out, err = exec.CommandContext(ctx, "docker", "run", "--rm", "-v", vol+":/data", "-e", "OPENAI_BASE_URL=http://127.0.0.1:1/v1",
		"-e", "TODOIST_TOKEN=0123456789abcdef", tag, "chat").CombinedOutput()
	if err != nil {
		t.Errorf("a fresh volume is not usable by the image's user: %v\n%s", err, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// baseImages returns the images the Dockerfile's stages start FROM,
// without the stages it builds itself.
func baseImages(dockerfile string) []string {
	stages := map[string]bool{}
	var out []string
	for _, l := range strings.Split(dockerfile, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		f = f[1:]
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			f = f[1:] // --platform=…
		}
		if len(f) == 0 {
			continue
		}
		if !stages[strings.ToLower(f[0])] {
			out = append(out, f[0])
		}
		if len(f) == 3 && strings.EqualFold(f[1], "AS") {
			stages[strings.ToLower(f[2])] = true
		}
	}
	return out
}

// dockerSkip says why the image cannot be built with docker here, or ""
// when it can: no daemon answers, or a base image is neither here nor
// pullable (a machine that reaches no image registry).
func dockerSkip(ctx context.Context, docker, dockerfile string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	info, cancelInfo := context.WithTimeout(ctx, 15*time.Second)
	defer cancelInfo()
	if out, err := exec.CommandContext(info, docker, "info").CombinedOutput(); err != nil {
		return fmt.Sprintf("no Docker daemon (docker info: %v): %s", err, lastLine(string(out)))
	}
	for _, img := range baseImages(dockerfile) {
		if exec.CommandContext(ctx, docker, "image", "inspect", img).Run() == nil {
			continue
		}
		if out, err := exec.CommandContext(ctx, docker, "pull", img).CombinedOutput(); err != nil {
			return fmt.Sprintf("the base image %s is not here and cannot be pulled (no image registry reachable?): docker pull: %v: %s", img, err, lastLine(string(out)))
		}
	}
	return ""
}

func TestBaseImagesOfTheDockerfile(t *testing.T) {
	got := baseImages(readRepoFile(t, "deploy/Dockerfile"))
	if len(got) != 2 || !strings.HasPrefix(got[0], "golang:") || !strings.HasPrefix(got[1], "gcr.io/distroless/") {
		t.Errorf("base images %v, want the Go builder and distroless", got)
	}
	if got := baseImages("FROM --platform=$BUILDPLATFORM golang:1 AS build\nFROM build AS test\nFROM scratch\n"); strings.Join(got, ",") != "golang:1,scratch" {
		t.Errorf("base images %v, want golang:1,scratch (a stage is no image)", got)
	}
}

// fakeDocker writes a docker command that answers info, and image
// inspect and pull as script says, and returns its path.
func fakeDocker(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker")
	body := "#!/bin/sh\ncase \"$1\" in\ninfo) exit 0 ;;\n" + script + "\nesac\nexit 2\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Where a Docker daemon answers but no registry does, the image test
// skips saying which image could not be pulled and why, instead of
// failing make test.
func TestDockerImageTestSkipsWithoutARegistry(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh for the fake docker command")
	}
	dockerfile := readRepoFile(t, "deploy/Dockerfile")
	offline := fakeDocker(t, `image) exit 1 ;;
pull) echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1 ;;`)
	why := dockerSkip(t.Context(), offline, dockerfile)
	for _, want := range []string{"golang:", "cannot be pulled", "no such host"} {
		if !strings.Contains(why, want) {
			t.Errorf("skip reason %q lacks %q", why, want)
		}
	}
	present := fakeDocker(t, "image) exit 0 ;;\npull) exit 1 ;;")
	if why := dockerSkip(t.Context(), present, dockerfile); why != "" {
		t.Errorf("with the base images here: skip %q, want a build", why)
	}
	pullable := fakeDocker(t, "image) exit 1 ;;\npull) exit 0 ;;")
	if why := dockerSkip(t.Context(), pullable, dockerfile); why != "" {
		t.Errorf("with the base images pullable: skip %q, want a build", why)
	}
	noDaemon := filepath.Join(t.TempDir(), "docker")
	if err := os.WriteFile(noDaemon, []byte("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := dockerSkip(t.Context(), noDaemon, dockerfile); !strings.Contains(why, "no Docker daemon") {
		t.Errorf("without a daemon: skip %q", why)
	}
}

// TestExamplesNameRealModels: every GPT-6 model the deploy files and
// the docs name is one OpenAI serves (its models page lists gpt-6-luna,
// gpt-6-sol, gpt-6-astra and gpt-6.1-sol; the deprecations page names
// gpt-6.1-terra as a replacement), so that an operator who copies an
// example gets a model that exists (issue 38, item 6: there is no
// gpt-6-luna-mini).
func TestExamplesNameRealModels(t *testing.T) {
	real := map[string]bool{"gpt-6-luna": true, "gpt-6-sol": true, "gpt-6-astra": true, "gpt-6.1-sol": true, "gpt-6.1-terra": true}
	files := []string{"README.md", "deploy/tidybot.env.example"}
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".png") {
				rel, _ := filepath.Rel(root, path)
				files = append(files, rel)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	model := regexp.MustCompile(`gpt-6(\.\d+)?(-[a-z]+)+`)
	for _, f := range files {
		for _, m := range model.FindAllString(readRepoFile(t, f), -1) {
			if !real[m] {
				t.Errorf("%s names %s, not an OpenAI model", f, m)
			}
		}
	}
}
