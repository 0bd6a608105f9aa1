-- A /cancel stored while the conversation has an unfinished run (stored
-- working or queued) stops that run, also when it is waiting to be
-- resumed (its replica died, or let the conversation go): the row
-- records the run's id ('' when there was none, or for the rows stored
-- before), and the run resumed takes as its mark the latest cancel
-- stored for another, so that its first save is refused.
ALTER TABLE cancels ADD COLUMN run text NOT NULL DEFAULT '';
