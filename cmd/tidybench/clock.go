package main

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

// rates is how a simulated model's calls are charged: time as a real
// model spends it (a fixed latency per call, prompt tokens at a prefill
// rate, cached prompt tokens at a tenth of that time, completion tokens at
// a generation rate) and money at per-token prices.
type rates struct {
	latency    time.Duration // per call
	prefill    float64       // prompt tokens a second
	generation float64       // completion tokens a second
	// Prices in dollars per million tokens.
	pricePrompt, priceCached, priceCompletion float64
}

// defaultRates are the benchmark's defaults (each one a flag). The prices
// are illustrative list prices of a mid-range hosted model, not a quote.
var defaultRates = rates{
	latency: 400 * time.Millisecond, prefill: 5000, generation: 80,
	pricePrompt: 1.25, priceCached: 0.125, priceCompletion: 10,
}

// cachedTimeShare is the share of a prompt token's prefill time a cached
// one costs.
const cachedTimeShare = 0.1

// callTime is the time a call with usage u takes at r.
func (r rates) callTime(u agent.Usage) time.Duration {
	fresh := float64(u.PromptTokens - u.CachedTokens)
	secs := fresh/r.prefill + cachedTimeShare*float64(u.CachedTokens)/r.prefill + float64(u.CompletionTokens)/r.generation
	return r.latency + time.Duration(secs*float64(time.Second))
}

// cost is the price in dollars of usage u at r.
func (r rates) cost(u agent.Usage) float64 {
	fresh := float64(u.PromptTokens - u.CachedTokens)
	return (fresh*r.pricePrompt + float64(u.CachedTokens)*r.priceCached + float64(u.CompletionTokens)*r.priceCompletion) / 1e6
}

func (r rates) String() string {
	return fmt.Sprintf("%v a call + prompt tokens at %.0f/s (cached at a tenth of that time) + completion tokens at %.0f/s; $%.3g/M prompt, $%.3g/M cached, $%.3g/M completion tokens",
		r.latency, r.prefill, r.generation, r.pricePrompt, r.priceCached, r.priceCompletion)
}

// clocked is a model whose calls are charged at its rates on a simulated
// clock (added up, not slept: the benchmark stays fast and its figures
// deterministic). A server that reports no cached tokens (the simulated
// models' does not) is taken to have cached the stable prefix a call
// shares with the run's previous call: the same tools and response
// format, then the same leading messages.
type clocked struct {
	agent.Model
	rates rates

	mu    sync.Mutex
	prev  *agent.Request
	usage agent.Usage
	spent time.Duration
}

func (c *clocked) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	resp, err := c.Model.Complete(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && resp.Usage.CachedTokens == 0 && c.prev != nil {
		resp.Usage.CachedTokens = min(sharedPrefixTokens(*c.prev, req), resp.Usage.PromptTokens)
	}
	c.prev = &req
	if err != nil {
		return resp, err
	}
	c.usage.Add(resp.Usage)
	c.spent += c.rates.callTime(resp.Usage)
	return resp, nil
}

// totals are the usage and the simulated model time of the calls so far.
func (c *clocked) totals() (agent.Usage, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usage, c.spent
}

// sharedPrefixTokens counts the tokens of the prefix b shares with a:
// nothing unless tools and response format are the same, then those and
// the leading messages the two have in common.
func sharedPrefixTokens(a, b agent.Request) int {
	if !reflect.DeepEqual(a.Tools, b.Tools) || !reflect.DeepEqual(a.Format, b.Format) {
		return 0
	}
	n := 0
	for n < len(a.Messages) && n < len(b.Messages) && reflect.DeepEqual(a.Messages[n], b.Messages[n]) {
		n++
	}
	if n == 0 && len(b.Tools) == 0 && b.Format == nil {
		return 0
	}
	prefix := agent.Request{Tools: b.Tools, Format: b.Format, Messages: b.Messages[:n]}
	return openai.EstimatePromptTokens(prefix)
}
