-- Slack response_urls (adapters/slack.Hooks), shared by the serve
-- replicas: the replica that receives a slash command is often not the
-- one that posts its answer. One per channel, the latest; url is sealed
-- (it posts into the conversation); expires is unix nanoseconds; used
-- counts the posts made with it, taken by an UPDATE … WHERE used < limit
-- so that no two replicas overspend Slack's 5 uses.
CREATE TABLE slack_hooks (
	channel text PRIMARY KEY,
	url     bytea NOT NULL,
	key_id  bytea,
	expires bigint NOT NULL,
	used    integer NOT NULL DEFAULT 0
);
CREATE INDEX slack_hooks_expires ON slack_hooks (expires);
