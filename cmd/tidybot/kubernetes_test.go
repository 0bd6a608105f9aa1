package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

// settings returns every setting's variable name with its default and
// whether it is a secret, from the Config type's tags.
func settings() map[string]struct {
	def    string
	secret bool
} {
	out := map[string]struct {
		def    string
		secret bool
	}{}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Config{})) {
		if name := f.Tag.Get("envconfig"); name != "" {
			out[name] = struct {
				def    string
				secret bool
			}{f.Tag.Get("default"), f.Tag.Get("secret") == "true"}
		}
	}
	return out
}

type k8sMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port string `yaml:"port"`
	} `yaml:"tcpSocket"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// k8sObject holds the fields the test reads of any of the kinds in
// deploy/kubernetes.
type k8sObject struct {
	file       string            // the file it came from, for messages
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   k8sMeta           `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"`
	Spec       struct {
		Replicas     int       `yaml:"replicas"`
		MinAvailable *int      `yaml:"minAvailable"`
		Selector     yaml.Node `yaml:"selector"`
		Template     struct {
			Metadata k8sMeta
			Spec     k8sPodSpec
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []k8sContainer `yaml:"containers"`
	Volumes    []struct {
		Name     string    `yaml:"name"`
		EmptyDir yaml.Node `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

// matchLabels reads a selector: a Service's is a map, a Deployment's and
// a PodDisruptionBudget's hold matchLabels.
func (o *k8sObject) matchLabels(t *testing.T) map[string]string {
	t.Helper()
	var s k8sSelector
	if err := o.Spec.Selector.Decode(&s); err == nil && s.MatchLabels != nil {
		return s.MatchLabels
	}
	var m map[string]string
	if err := o.Spec.Selector.Decode(&m); err != nil {
		t.Fatalf("%s %s: selector: %v", o.Kind, o.Metadata.Name, err)
	}
	return m
}

// loadKubernetes decodes deploy/kubernetes, one object a file, by kind.
func loadKubernetes(t *testing.T) map[string][]*k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy/kubernetes/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	out := map[string][]*k8sObject{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var o k8sObject
		if err := yaml.Unmarshal(raw, &o); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if o.Kind == "" || o.APIVersion == "" {
			t.Fatalf("%s: no kind or apiVersion", filepath.Base(f))
		}
		o.file = filepath.Base(f)
		out[o.Kind] = append(out[o.Kind], &o)
	}
	return out
}

func one(t *testing.T, objs map[string][]*k8sObject, kind string) *k8sObject {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("%d %s manifests, want 1", len(objs[kind]), kind)
	}
	return objs[kind][0]
}

// subset reports whether every label of sel is in labels (and sel has one).
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestKubernetesManifests reads deploy/kubernetes as Kubernetes would
// and checks that the pieces fit: two replicas, probes on a route serve
// answers, the disruption budget and the Service select the
// Deployment's pods, every variable is a real setting, secrets come
// from the Secret and every key referenced is in it.
func TestKubernetesManifests(t *testing.T) {
	objs := loadKubernetes(t)
	kust := one(t, objs, "Kustomization")
	var files []string
	for kind, list := range objs {
		for _, o := range list {
			if kind != "Kustomization" {
				files = append(files, o.file)
			}
		}
	}
	sort.Strings(files)
	res := append([]string(nil), kust.Resources...)
	sort.Strings(res)
	if !reflect.DeepEqual(res, files) {
		t.Errorf("kustomization.yaml lists %v, the directory holds %v", res, files)
	}

	dep := one(t, objs, "Deployment")
	if dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %d, want 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template
	sel := dep.matchLabels(t)
	if !subset(sel, pod.Metadata.Labels) {
		t.Fatalf("the Deployment's selector %v does not select its pods %v", sel, pod.Metadata.Labels)
	}
	pdb := one(t, objs, "PodDisruptionBudget")
	if got := pdb.matchLabels(t); !subset(got, pod.Metadata.Labels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the Deployment's pods %v", got, pod.Metadata.Labels)
	}
	if m := pdb.Spec.MinAvailable; m == nil || *m < 1 || *m >= dep.Spec.Replicas {
		t.Errorf("PodDisruptionBudget minAvailable %v, want at least 1 and fewer than the %d replicas", m, dep.Spec.Replicas)
	}
	if d := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second; d <= shutdownBudget {
		t.Errorf("terminationGracePeriodSeconds %v, want more than tidybot's own %v", d, shutdownBudget)
	}
	if sc := pod.Spec.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser == 0 {
		t.Errorf("the pod may run as root: %+v", sc)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if strings.Join(c.Args, " ") != "serve" {
		t.Errorf("the container runs %v, want serve", c.Args)
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
		!reflect.DeepEqual(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("the container is not locked down: %+v", c.SecurityContext)
	}
	// The image keeps TIDYBOT_DB (and the runs socket) in /data: on a
	// read-only root it must be a volume.
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == "/data"
	}
	if !mounted {
		t.Error("/data is not mounted: serve cannot make its socket on a read-only root")
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}

	// Settings: every variable is one tidybot reads; secrets only from
	// the Secret; an empty value only where the default is empty.
	known := settings()
	cm := one(t, objs, "ConfigMap")
	secret := one(t, objs, "Secret")
	for k, v := range cm.Data {
		s, ok := known[k]
		switch {
		case !ok:
			t.Errorf("ConfigMap sets %s, which is no setting", k)
		case s.secret:
			t.Errorf("ConfigMap sets %s, a secret: it belongs in the Secret", k)
		case v == "" && s.def != "":
			t.Errorf("ConfigMap sets %s empty, overriding its default %q", k, s.def)
		}
	}
	for k := range secret.StringData {
		if _, ok := known[k]; !ok {
			t.Errorf("the Secret holds %s, which is no setting", k)
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name != cm.Metadata.Name {
			t.Errorf("envFrom names ConfigMap %q, the manifests have %q", ef.ConfigMapRef.Name, cm.Metadata.Name)
		}
		if ef.SecretRef != nil && ef.SecretRef.Name != secret.Metadata.Name {
			t.Errorf("envFrom names Secret %q, the manifests have %q", ef.SecretRef.Name, secret.Metadata.Name)
		}
	}
	fromSecret := map[string]bool{}
	for _, e := range c.Env {
		s, ok := known[e.Name]
		if !ok {
			t.Errorf("env %s is no setting", e.Name)
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			if s.secret {
				t.Errorf("env %s is a secret set in the manifest: take it from the Secret", e.Name)
			}
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != secret.Metadata.Name {
			t.Errorf("env %s refers to Secret %q, the manifests have %q", e.Name, ref.Name, secret.Metadata.Name)
		}
		if _, ok := secret.StringData[ref.Key]; !ok {
			t.Errorf("env %s refers to key %s, which the Secret lacks", e.Name, ref.Key)
		}
		fromSecret[e.Name] = true
	}
	for k := range secret.StringData {
		if !fromSecret[k] {
			t.Errorf("the Secret's %s reaches no container", k)
		}
	}
	// Every secret setting has its key, so that each route the docs
	// recommend (Slack's Socket Mode: SLACK_APP_TOKEN; team mode:
	// TODOIST_CLIENT_SECRET) is one value to fill in; team mode's other
	// half, TODOIST_CLIENT_ID, is in the ConfigMap.
	for k, s := range known {
		if _, ok := secret.StringData[k]; s.secret && !ok {
			t.Errorf("the Secret lacks %s, a secret setting", k)
		}
	}
	if _, ok := cm.Data["TODOIST_CLIENT_ID"]; !ok {
		t.Error("the ConfigMap lacks TODOIST_CLIENT_ID: team mode cannot be turned on")
	}
	if !fromSecret["TIDYBOT_DATABASE_URL"] {
		t.Error("the replicas are given no TIDYBOT_DATABASE_URL: each would keep its own bbolt file")
	}

	// The HTTP port: the one TIDYBOT_HTTP_ADDR opens, named for the
	// probes and the Service.
	_, port, err := net.SplitHostPort(cm.Data["TIDYBOT_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("ConfigMap TIDYBOT_HTTP_ADDR %q: %v", cm.Data["TIDYBOT_HTTP_ADDR"], err)
	}
	svc := one(t, objs, "Service")
	if !subset(svc.matchLabels(t), pod.Metadata.Labels) {
		t.Errorf("the Service selects %v, not the Deployment's pods %v", svc.matchLabels(t), pod.Metadata.Labels)
	}
	for _, p := range svc.Spec.Ports {
		if _, ok := ports[p.TargetPort]; !ok {
			t.Errorf("the Service's port %d targets %q, which no container port is named", p.Port, p.TargetPort)
		}
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatal("no HTTP readiness probe")
	}
	// Liveness must not be /healthz: it says 503 while serve waits for a
	// platform unreachable at start, and a restart would not help.
	if p := c.LivenessProbe; p == nil || p.TCPSocket == nil || ports[p.TCPSocket.Port] == 0 {
		t.Errorf("the liveness probe is not a TCP check of a container port: %+v", p)
	}
	var paths []string
	for name, p := range map[string]*k8sProbe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		if n, ok := ports[p.HTTPGet.Port]; !ok || port != strconv.Itoa(n) {
			t.Errorf("the %s probe's port %q is not the container port %s opened by TIDYBOT_HTTP_ADDR (%v)", name, p.HTTPGet.Port, port, ports)
		}
		paths = append(paths, p.HTTPGet.Path)
	}
	// The probes' paths are routes serve answers.
	base := serve(t, newEnv(t))
	for _, p := range paths {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("serve answers the probe's GET %s with %d, want 200", p, resp.StatusCode)
		}
	}
}

// TestKubernetesManifestsWithKubectl renders the manifests with kubectl
// where it is installed (kubectl kustomize works offline) and, where a
// cluster answers, dry-runs them (kubectl's client-side dry run still
// asks the server for its API list).
func TestKubernetesManifestsWithKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl: the manifests are checked by TestKubernetesManifests only")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := filepath.Join(root, "deploy/kubernetes")
	if out, err := exec.CommandContext(ctx, kubectl, "kustomize", dir).CombinedOutput(); err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, kubectl, "version", "--request-timeout=3s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Server Version") {
		t.Skipf("kubectl reaches no cluster (kubectl version: %v): --dry-run=client needs one for the API list; rendered with kubectl kustomize only", lastLine(string(out)))
	}
	if out, err := exec.CommandContext(ctx, kubectl, "apply", "--dry-run=client", "-k", dir).CombinedOutput(); err != nil {
		t.Errorf("kubectl apply --dry-run=client: %v\n%s", err, out)
	}
}
