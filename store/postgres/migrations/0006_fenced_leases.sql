-- Fenced leases on the database's clock (issue 35). A conversation's
-- lease is a row: its owner (a replica's id) and an epoch, a number
-- that grows each time a holder takes it (from lease_epochs, so that it
-- never repeats even for a row deleted and made again). Every write a
-- holder makes for the conversation is conditional on its epoch, in the
-- same transaction: one made after another replica took the lease is
-- refused. A replica says it is alive by its row in replicas, whose
-- beat it sets to now() every few seconds, and by its replica lock (a
-- session advisory lock on its lease connection): a lease whose owner's
-- beat is older than the lease time, or whose owner's lock is free, may
-- be taken. A /cancel is a row in cancels (its NOTIFY only wakes): the
-- replica running the conversation's run sees it at the run's next step
-- even when the notification was lost.
CREATE SEQUENCE lease_epochs;
CREATE TABLE replicas (
    id text PRIMARY KEY,
    beat timestamptz NOT NULL
);
CREATE TABLE leases (
    thread_key text PRIMARY KEY,
    owner text,
    epoch bigint NOT NULL
);
CREATE INDEX leases_owner ON leases (owner) WHERE owner IS NOT NULL;
CREATE TABLE cancels (
    id bigserial PRIMARY KEY,
    thread_key text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cancels_thread ON cancels (thread_key, id);
