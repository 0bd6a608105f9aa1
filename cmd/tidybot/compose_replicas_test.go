package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

type composeService struct {
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	EnvFile     string            `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Deploy      struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	StopGracePeriod string `yaml:"stop_grace_period"`
	ReadOnly        bool   `yaml:"read_only"`
}

// dependsOn reads depends_on in either form (a list, or a map of
// conditions) as service → condition ("" for the list form).
func (s composeService) dependsOn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	var list []string
	if err := s.DependsOn.Decode(&list); err == nil {
		for _, d := range list {
			out[d] = ""
		}
		return out
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := s.DependsOn.Decode(&m); err != nil && s.DependsOn.Kind != 0 {
		t.Fatalf("depends_on: %v", err)
	}
	for k, v := range m {
		out[k] = v.Condition
	}
	return out
}

// TestComposeReplicas reads deploy/compose.replicas.yaml: PostgreSQL,
// the schema migrated once before two serve replicas start on it, and
// one published address (Caddy) that reaches both.
func TestComposeReplicas(t *testing.T) {
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, "deploy/compose.replicas.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	pg, mig, app, proxy := c.Services["postgres"], c.Services["migrate"], c.Services["tidybot"], c.Services["proxy"]
	if pg.Image == "" || mig.Image == "" || app.Image == "" || proxy.Image == "" {
		t.Fatalf("want services postgres, migrate, tidybot and proxy: %v", c.Services)
	}
	if app.Deploy.Replicas != 2 {
		t.Errorf("tidybot replicas = %d, want 2", app.Deploy.Replicas)
	}
	if mig.Image != app.Image || strings.Join(mig.Command, " ") != "migrate" || strings.Join(app.Command, " ") != "serve" {
		t.Errorf("migrate runs %s %v, the replicas %s %v: want tidybot migrate, then serve, of one image", mig.Image, mig.Command, app.Image, app.Command)
	}
	if cond := app.dependsOn(t)["migrate"]; cond != "service_completed_successfully" {
		t.Errorf("the replicas start when migrate is %q, want service_completed_successfully", cond)
	}
	if cond := mig.dependsOn(t)["postgres"]; cond != "service_healthy" {
		t.Errorf("migrate starts when postgres is %q, want service_healthy", cond)
	}
	// Both reach the postgres service with one URL, whatever the password.
	dbURL := app.Environment["TIDYBOT_DATABASE_URL"]
	if dbURL == "" || mig.Environment["TIDYBOT_DATABASE_URL"] != dbURL {
		t.Fatalf("TIDYBOT_DATABASE_URL: replicas %q, migrate %q: want one", dbURL, mig.Environment["TIDYBOT_DATABASE_URL"])
	}
	u, err := url.Parse(strings.ReplaceAll(dbURL, "${POSTGRES_PASSWORD}", "pw"))
	if err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" || strings.TrimPrefix(u.Path, "/") != pg.Environment["POSTGRES_DB"] ||
		u.User.Username() != pg.Environment["POSTGRES_USER"] {
		t.Errorf("TIDYBOT_DATABASE_URL %q does not name the postgres service's database and user (%v)", dbURL, err)
	}
	known := settings()
	for _, s := range []composeService{mig, app} {
		if s.Build == nil || s.Build.Context != ".." || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s is not built from deploy/Dockerfile: compose would pull it from a registry", s.Image)
		}
		for k := range s.Environment {
			if _, ok := known[k]; !ok {
				t.Errorf("compose sets %s, which is no setting", k)
			}
		}
		if s.EnvFile != "tidybot.env" || !s.ReadOnly {
			t.Errorf("env_file %q, read_only %v: want tidybot.env, true", s.EnvFile, s.ReadOnly)
		}
	}
	if d, err := time.ParseDuration(app.StopGracePeriod); err != nil || d <= shutdownBudget {
		t.Errorf("stop_grace_period %q, want more than tidybot's own %v", app.StopGracePeriod, shutdownBudget)
	}
	// One address: the replicas publish nothing (two could not share a
	// host port), the proxy publishes one.
	if len(app.Ports) != 0 {
		t.Errorf("the replicas publish %v: only the proxy should", app.Ports)
	}
	if len(proxy.Ports) != 1 {
		t.Errorf("the proxy publishes %v, want one address", proxy.Ports)
	}
	// The proxy's configuration reaches the service on the port the
	// image's TIDYBOT_HTTP_ADDR opens.
	var caddyfile string
	for _, v := range proxy.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if strings.HasPrefix(dst, "/etc/caddy/Caddyfile") {
			raw, err := os.ReadFile(filepath.Join(root, "deploy", src))
			if err != nil {
				t.Fatalf("the proxy's %s: %v", src, err)
			}
			caddyfile = string(raw)
		}
	}
	if caddyfile == "" {
		t.Fatal("the proxy mounts no Caddyfile")
	}
	m := regexp.MustCompile(`TIDYBOT_HTTP_ADDR=:(\d+)`).FindStringSubmatch(readRepoFile(t, "deploy/Dockerfile"))
	if m == nil {
		t.Fatal("the Dockerfile sets no TIDYBOT_HTTP_ADDR")
	}
	for _, want := range []string{"reverse_proxy", "dynamic a", "name tidybot", "port " + m[1]} {
		if !strings.Contains(caddyfile, want) {
			t.Errorf("the Caddyfile lacks %q: it must reach every replica of service tidybot on port %s", want, m[1])
		}
	}
}
