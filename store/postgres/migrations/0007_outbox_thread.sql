-- A conversation's answers are posted in order (issue 35): an outbox
-- entry committed under a conversation's lease names that conversation,
-- and only its lease's holder takes the entry over from a dead process
-- (ClaimThread), before it posts anything new there. Entries without one
-- (written by an older tidybot, or outside any lease) are claimed by the
-- sweep as before.
ALTER TABLE outbox ADD COLUMN thread_key text;
CREATE INDEX outbox_thread ON outbox (thread_key) WHERE thread_key IS NOT NULL;
