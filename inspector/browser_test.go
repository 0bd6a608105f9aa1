package inspector

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tidybot/tidybot/agent"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the phone-width screenshot to docs/inspector.png")

// chromium finds Debian's chromium (or TIDYBOT_CHROMIUM), or skips the
// test saying why.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TIDYBOT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: the browser test needs Chromium and none is on PATH: install it with `apt-get install -y chromium` (.ci/run does), or set TIDYBOT_CHROMIUM")
	return ""
}

// browser starts a headless Chromium with a fresh profile for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	return ctx
}

func TestBrowserShowsARunOnAPhone(t *testing.T) {
	signer, _ := NewSigner(testKey, nil)
	src := memSource{"r": demoRun(t), "h": questionRun(t, "h", `<script>document.title="pwned"</script>`)}
	mux := http.NewServeMux()
	mux.Handle("GET /runs/{id}", NewHandler(src, signer, agent.NewRedactor(), nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := browser(t)
	// The first call starts the browser: no timeout on it (chromedp.Run).
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1.5), chromedp.EmulateMobile)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
	}
	innerText := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		must(err)
		return s
	}
	must(chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/runs/r?sig="+signer.Sign("r", time.Hour)),
		chromedp.WaitVisible("#request"),
	))
	request, err := chromedp.Run(ctx, chromedp.Text("#request"))
	must(err)
	body := innerText()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	must(err)
	must(chromedp.Do(ctx, chromedp.Click("#step-2 .obs summary")))
	after := innerText()
	if !strings.Contains(request, "Tidy my inbox") {
		t.Errorf("the request shows as %q", request)
	}
	for _, want := range []string{"What tidybot did", "Filed 5 tasks into Work and Home", "Step 1", "Step 4", "get_overview", "move_tasks", "write",
		"❓ Which project for “Call the plumber”?", "💬 Home", "1,850 + 64 tokens", "Todoist snapshot", "Waiting for you", "Changes to your Todoist"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Projects now: Work 12") {
		t.Error("the long observation is shown whole before it is expanded")
	}
	if !strings.Contains(after, "Projects now: Work 12") {
		t.Errorf("expanding the observation did not show all of it:\n%s", after)
	}
	if len(png) < 1000 {
		t.Fatalf("screenshot of %d bytes", len(png))
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "inspector.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "docs", "inspector.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Dark mode follows the system.
	must(chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})))
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	must(err)
	if bg != "rgb(21, 21, 23)" {
		t.Errorf("dark mode background %s, want rgb(21, 21, 23)", bg)
	}

	// A task named <script> is text, and no script runs.
	must(chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/runs/h?sig="+signer.Sign("h", time.Hour)),
		chromedp.WaitVisible("#request"),
	))
	body = innerText()
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
	must(err)
	scripts, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(document.scripts.length)`))
	must(err)
	if !strings.Contains(body, `<script>document.title="pwned"</script>`) || title == "pwned" || scripts != "0" {
		t.Errorf("hostile content: title %q, %s scripts, text:\n%s", title, scripts, body)
	}
}
