-- Granary schema 1: the three cluster stores. Every row belongs to one
-- cluster (--cluster_id), so several clusters can share a database.

-- Membership: one version row per cluster, advanced by every change in the
-- same transaction as the change (a compare-and-swap on the version).
CREATE TABLE granary_membership_version (
  cluster_id text PRIMARY KEY,
  version bigint NOT NULL CHECK (version >= 0)
);

-- One row per silo generation; the whole member (granary.v1.Member) is in
-- `member`, its key and status are columns for queries and clean-up.
CREATE TABLE granary_members (
  cluster_id text NOT NULL,
  address text NOT NULL,
  generation bigint NOT NULL,
  status smallint NOT NULL,
  member bytea NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster_id, address, generation)
);

-- Grain state: `version` is the etag; a cleared state keeps its row with a
-- NULL `state` (a tombstone), so its version never goes back.
CREATE TABLE granary_grain_state (
  cluster_id text NOT NULL,
  grain_type text NOT NULL,
  grain_key text NOT NULL,
  version bigint NOT NULL CHECK (version > 0),
  state bytea,
  PRIMARY KEY (cluster_id, grain_type, grain_key)
);

-- Reminders: `grain_hash` is the grain's place on the directory ring, so a
-- silo reads the reminders of its own ranges.
CREATE TABLE granary_reminders (
  cluster_id text NOT NULL,
  grain_type text NOT NULL,
  grain_key text NOT NULL,
  name text NOT NULL,
  grain_hash bigint NOT NULL,
  start_us bigint NOT NULL,
  period_us bigint NOT NULL CHECK (period_us > 0),
  PRIMARY KEY (cluster_id, grain_type, grain_key, name)
);
CREATE INDEX granary_reminders_by_hash ON granary_reminders (cluster_id, grain_hash);
