-- A /cancel stored while the conversation has no unfinished run stops
-- the run its oldest job will begin (issue 35: a cancel is effective
-- before the run's first save): the row records that job's seq (0 when
-- a run was unfinished, or for the rows stored before), and the run
-- begun from that job takes as its mark the latest cancel stored for
-- another, so that its first save is refused.
ALTER TABLE cancels ADD COLUMN job bigint NOT NULL DEFAULT 0;
