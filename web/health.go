package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthPath answers "ok" while serve runs (container health checks).
const healthPath = "/healthz"

// CheckHealth asks the serve listening on addr (TIDYBOT_HTTP_ADDR) for
// healthPath, and returns a one-line reason when it does not answer ok.
// A host left out or unspecified is this machine's loopback.
func CheckHealth(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("health: TIDYBOT_HTTP_ADDR %q is not host:port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1" // serve listens on every interface, loopback included
	}
	u := "http://" + net.JoinHostPort(host, port) + healthPath
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("health: GET %s: HTTP %d %q", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
