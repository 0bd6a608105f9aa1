-- Durable timers (bot.Timer): the morning digest and autopilot polls.
-- A replica claims a due timer with FOR UPDATE SKIP LOCKED and holds it
-- until lease_until; one whose replica died is claimed again once the
-- lease lapses. Times are unix nanoseconds.
CREATE TABLE timers (
	kind        text NOT NULL,
	key         text NOT NULL,
	due         bigint NOT NULL,
	data        text NOT NULL DEFAULT '',
	claim       text NOT NULL DEFAULT '',
	lease_until bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, key)
);
CREATE INDEX timers_due ON timers (due);
