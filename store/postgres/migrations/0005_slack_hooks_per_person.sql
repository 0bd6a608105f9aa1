-- A response_url is its person's, never the channel's (issue 33): what
-- is posted through it is shown to the person who typed the command or
-- pressed the button alone. Kept by channel and person, and bound to the
-- first run that answers through it (run_id, '' for none yet). The old
-- table's rows name no person, so none of them can be used safely: they
-- go (a response_url lives 30 minutes).
DROP TABLE slack_hooks;
CREATE TABLE slack_hooks (
	seq     bigserial PRIMARY KEY,
	channel text NOT NULL,
	person  text NOT NULL,
	run_id  text NOT NULL DEFAULT '',
	url     bytea NOT NULL,
	key_id  bytea,
	expires bigint NOT NULL,
	used    integer NOT NULL DEFAULT 0
);
CREATE INDEX slack_hooks_place ON slack_hooks (channel, person);
CREATE INDEX slack_hooks_expires ON slack_hooks (expires);
