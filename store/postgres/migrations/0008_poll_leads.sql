-- The Telegram poller's lead is fenced like a conversation's lease
-- (issue 35): each replica that takes the lead (its advisory lock) sets
-- the lead's epoch from lease_epochs, and what it writes as the poller
-- (the getUpdates offset, the updates a poll stores) is refused, in the
-- same transaction, once another replica took the lead since.
CREATE TABLE poll_leads (
    name text PRIMARY KEY,
    epoch bigint NOT NULL
);
