-- Several serve replicas on one database (issue 25). An outbox entry is
-- posted by the process that owns it: the one whose run wrote it, or,
-- once that process has died (its replica lock is free), whichever
-- replica claims it. platform lets a replica claim only entries of the
-- platforms it serves. Entries older than this migration have neither:
-- any replica may claim them.
ALTER TABLE outbox ADD COLUMN owner text;
ALTER TABLE outbox ADD COLUMN platform text;
CREATE INDEX outbox_owner ON outbox (owner);
CREATE INDEX runs_unfinished_thread ON runs (thread_key) WHERE status IN ('working', 'queued');
