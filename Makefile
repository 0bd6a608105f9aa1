# tidybot — see README.md and docs/.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHTIME ?= 1x

.PHONY: build test soak lint run demo bench bench-replicas bench-serve fuzz deps deps-list eval eval-sim fakes-check

build:
	go build -ldflags "$(LDFLAGS)" -o bin/tidybot ./cmd/tidybot

test: ## go test -race -count=1 ./..., then the skipped tests and why (cmd/testsum); fails as go test fails
	go run ./cmd/testsum -race -count=1 ./...

soak: ## the randomized engine test at full length (over 10,000 model replies); SEED=n runs one seed
	go test -count=1 -run TestEngineRandomized ./agent -args -soak $(if $(SEED),-random.seed=$(SEED))

lint:
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go run $(STATICCHECK) ./...

run: build
	./bin/tidybot chat

demo:
	go run ./cmd/tidydemo

bench: bench-serve ## every benchmark once (docs/performance.md), issue 36's table first
	go test -run '^$$' -bench . -skip '^BenchmarkServe$$' -benchmem ./...
	go run ./cmd/tidybench -fast

SERVEFLAGS ?=

bench-replicas: ## issue 35's side by side: one bbolt replica, one and two PostgreSQL replicas (2,000 messages), sharing the machine's cores, then each limited to half a core (a cgroup CPU quota: needs root, else it says why it skips)
	go test ./cmd/tidybot -run '^$$' -bench 'ReplicaThroughput/(bbolt-1|postgres-1|postgres-2)$$' -benchtime 1x -count 3
	go test ./cmd/tidybot -run '^$$' -bench 'ReplicaThroughput/(bbolt-1|postgres-1|postgres-2)$$' -benchtime 1x -count 3 -args -replica-cpus 0.5

bench-serve: ## bbolt and PostgreSQL side by side through the built serve (2,000 Slack DMs from 200 people): a Markdown table; SERVEFLAGS="-serve-people 2000" for 20,000 messages
	go test ./cmd/tidybot -run '^$$' -bench '^BenchmarkServe$$' -benchtime 1x -timeout 60m $(if $(SERVEFLAGS),-args $(SERVEFLAGS))

EVALFLAGS ?= -k 3

eval: ## measure the configured model (OPENAI_*, TIDYBOT_PROTOCOL) on the suite, against fake Todoist accounts
	go run -ldflags "$(LDFLAGS)" ./cmd/tidybot eval $(EVALFLAGS)

eval-sim: ## the same suite played by a SIMULATED scripted model: shows the output format, measures no model
	go run -ldflags "$(LDFLAGS)" ./cmd/tidybot eval -sim $(EVALFLAGS)

fuzz:
	go test -run '^$$' -fuzz FuzzParseReply -fuzztime 60s ./agent

fakes-check: ## drive each fake with the vendor's own client from npm (internal/fakescheck; needs node and npm, and the registry)
	go build -o bin/fakeservers ./cmd/fakeservers
	cd internal/fakescheck && npm ci --no-audit --no-fund --loglevel=error && FAKESERVERS="$(CURDIR)/bin/fakeservers" node check.js

deps: ## the import rules of DESIGN §1, enforced
	go test -count=1 ./internal/layout

deps-list: ## who imports what
	@go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... | grep tidybot
