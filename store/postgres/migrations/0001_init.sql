-- tidybot's schema, version 1. Times are unix nanoseconds (bigint), as
-- bbolt keeps them: timestamptz would round them to microseconds. Every
-- value column holds JSON, sealed (see store/seal) when it holds what
-- people wrote or what the agent read of their Todoist; key_id names the
-- data key that sealed it (NULL: plain), so that destroying a key finds
-- the few values it still seals.
CREATE TABLE meta (
	key   text PRIMARY KEY,
	value bytea NOT NULL
);

CREATE TABLE events (
	key  text PRIMARY KEY,
	at   bigint NOT NULL
);
CREATE INDEX events_at ON events (at);

CREATE TABLE threads (
	key   text PRIMARY KEY,
	value bytea NOT NULL
);

CREATE TABLE messages (
	seq        bigserial PRIMARY KEY,
	thread_key text NOT NULL,
	at         bigint NOT NULL,
	key_id     bytea,
	value      bytea NOT NULL
);
CREATE INDEX messages_thread ON messages (thread_key, seq);
CREATE INDEX messages_at ON messages (at);

CREATE TABLE runs (
	id                text PRIMARY KEY,
	thread_key        text NOT NULL,
	status            text NOT NULL,
	wait_key          text,
	created           bigint NOT NULL,
	updated           bigint NOT NULL,
	key_id            bytea,
	value             bytea NOT NULL,
	transcript_key_id bytea,
	transcript        bytea
);
CREATE INDEX runs_thread ON runs (thread_key, created, id);
CREATE INDEX runs_open ON runs (status, created, id) WHERE status NOT IN ('done', 'failed', 'cancelled');
CREATE INDEX runs_wait_key ON runs (wait_key) WHERE wait_key IS NOT NULL;

CREATE TABLE jobs (
	seq        bigserial PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	thread_key text NOT NULL,
	key_id     bytea,
	value      bytea NOT NULL
);
CREATE INDEX jobs_thread ON jobs (thread_key, seq);

CREATE TABLE audit (
	seq    bigserial PRIMARY KEY,
	run_id text NOT NULL,
	key_id bytea,
	value  bytea NOT NULL
);
CREATE INDEX audit_run ON audit (run_id, seq);

CREATE TABLE settings (
	key    text PRIMARY KEY,
	key_id bytea,
	value  bytea NOT NULL
);

CREATE TABLE outbox (
	seq    bigserial PRIMARY KEY,
	id     text NOT NULL UNIQUE,
	key_id bytea,
	value  bytea NOT NULL
);

CREATE TABLE snapshots (
	key    text PRIMARY KEY,
	used   bigint NOT NULL,
	key_id bytea,
	value  bytea NOT NULL
);
CREATE INDEX snapshots_used ON snapshots (used);

-- Data keys, each sealed with the master key; current_keys names the key
-- that seals a scope's new values in the period.
CREATE TABLE data_keys (
	id     bytea PRIMARY KEY,
	period bigint NOT NULL,
	scope  text NOT NULL,
	sealed bytea NOT NULL
);
CREATE INDEX data_keys_scope ON data_keys (scope);
CREATE INDEX data_keys_period ON data_keys (period);

CREATE TABLE current_keys (
	scope  text PRIMARY KEY,
	id     bytea NOT NULL,
	period bigint NOT NULL
);
