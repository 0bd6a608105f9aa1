package openai

import (
	"hash/maphash"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tidybot/tidybot/agent"
)

// encoding is the tokenizer of estimates. Servers that report no usage
// are local ones, not OpenAI, so no estimate is exact; cl100k_base is
// close to the Llama 3 family's tokenizer (which extends it) and loads in
// a third of o200k_base's time.
const encoding = "cl100k_base"

// Per-message overheads of OpenAI's chat format (from OpenAI's cookbook,
// "How to count tokens with tiktoken").
const (
	tokensPerMessage = 3
	tokensPerReply   = 3
	tokensPerTool    = 8
)

// encoder loads the BPE ranks from the files embedded in
// tiktoken-go-loader, never from the network, on first use.
var encoder = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	return tiktoken.GetEncoding(encoding)
})

// CountTokens returns the number of tokens of text in cl100k_base (or a
// quarter of its length, should the tokenizer fail to load). Counts of
// longer texts are remembered (see counted): every step of every run
// counts the same system prompt, tool list and schema again.
func CountTokens(text string) int {
	if text == "" {
		return 0
	}
	if len(text) < minCounted {
		return encode(text)
	}
	h := maphash.String(countSeed, text)
	countMu.Lock()
	n, ok := counted[countKey{h, len(text)}]
	countMu.Unlock()
	if ok {
		return n
	}
	n = encode(text)
	countMu.Lock()
	if len(counted) >= maxCounted {
		clear(counted)
	}
	counted[countKey{h, len(text)}] = n
	countMu.Unlock()
	return n
}

func encode(text string) int {
	enc, err := encoder()
	if err != nil {
		return (len(text) + 3) / 4
	}
	return len(enc.EncodeOrdinary(text))
}

// counted remembers the token counts of texts of at least minCounted
// bytes, by a 64-bit hash and length of the text rather than the text, so
// that it holds no conversation and stays small (at most maxCounted
// entries, about 100 KB; it starts over when full). Counts are estimates
// anyway: a hash collision, about one in 2^64, costs a wrong estimate.
var (
	countMu   sync.Mutex
	counted   = map[countKey]int{}
	countSeed = maphash.MakeSeed()
)

type countKey struct {
	hash uint64
	size int
}

const (
	minCounted = 64
	maxCounted = 4096
)

// EstimateUsage estimates the usage of one call from what was sent and
// received, for servers that report none: message and tool tokens with
// OpenAI's per-message overheads (prompt), content and tool calls
// (completion). Estimated is set and Calls is 1.
func EstimateUsage(req agent.Request, resp agent.Response) agent.Usage {
	return agent.Usage{
		PromptTokens:     EstimatePromptTokens(req),
		CompletionTokens: estimateCompletion(resp),
		Calls:            1,
		Estimated:        true,
	}
}

// EstimatePromptTokens estimates the prompt tokens of req.
func EstimatePromptTokens(req agent.Request) int {
	n := tokensPerReply
	for _, m := range req.Messages {
		n += tokensPerMessage + CountTokens(string(m.Role)) + CountTokens(m.Content)
		for _, tc := range m.ToolCalls {
			n += tokensPerMessage + CountTokens(tc.Name) + CountTokens(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += tokensPerTool + CountTokens(t.Name) + CountTokens(t.Description) + CountTokens(string(t.Parameters))
	}
	if req.Format != nil {
		n += CountTokens(string(req.Format.Schema))
	}
	return n
}

func estimateCompletion(resp agent.Response) int {
	n := CountTokens(resp.Content)
	for _, tc := range resp.ToolCalls {
		n += tokensPerMessage + CountTokens(tc.Name) + CountTokens(tc.Arguments)
	}
	return n
}
