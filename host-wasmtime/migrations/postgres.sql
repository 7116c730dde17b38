-- The Postgres journal of foldline (applied by PgJournal::open under an
-- advisory lock, so replicas starting together do not race; idempotent).
-- Bodies are stored as the JSON text foldline wrote (not jsonb, which would
-- reorder keys): what is read back is byte for byte what was appended.

CREATE TABLE IF NOT EXISTS foldline_events (
  conversation TEXT NOT NULL,
  seq BIGINT NOT NULL,
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  chain_slot TEXT,
  PRIMARY KEY (conversation, seq)
);
-- One boundary per chain head: a fork is refused by the database.
CREATE UNIQUE INDEX IF NOT EXISTS foldline_events_chain_slot
  ON foldline_events (conversation, chain_slot) WHERE chain_slot IS NOT NULL;

-- Append-only: the database refuses UPDATE, DELETE and TRUNCATE of events.
CREATE OR REPLACE FUNCTION foldline_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the journal is append-only';
END $$;
DROP TRIGGER IF EXISTS foldline_events_no_change ON foldline_events;
CREATE TRIGGER foldline_events_no_change BEFORE UPDATE OR DELETE ON foldline_events
  FOR EACH ROW EXECUTE FUNCTION foldline_append_only();
DROP TRIGGER IF EXISTS foldline_events_no_truncate ON foldline_events;
CREATE TRIGGER foldline_events_no_truncate BEFORE TRUNCATE ON foldline_events
  FOR EACH STATEMENT EXECUTE FUNCTION foldline_append_only();

-- Whoever watches the journal hears of each write when it commits (a
-- server's long polls: PgWatch): one notification per conversation a
-- statement wrote; an id too long for a notification's payload is heard as
-- a write somewhere (''). A trigger, not a line of foldline_append: a
-- replica of an older foldline that applies its own foldline_append (a
-- rolling deploy, a rollback) leaves it in place.
CREATE OR REPLACE FUNCTION foldline_notify_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('foldline_events',
      CASE WHEN octet_length(w.conversation) < 7900 THEN w.conversation ELSE '' END)
    FROM (SELECT DISTINCT conversation FROM written) AS w;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS foldline_events_written ON foldline_events;
CREATE TRIGGER foldline_events_written AFTER INSERT ON foldline_events
  REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION foldline_notify_written();

-- The last position of each conversation: its row lock orders appenders.
CREATE TABLE IF NOT EXISTS foldline_heads (
  conversation TEXT PRIMARY KEY,
  seq BIGINT NOT NULL
);

-- What each message claims for its turn id (the JSON array of the fields a
-- redelivery must repeat, its content hash among them: journal/claims.rs,
-- the JS journals' form): a turn id names one message, so an append that
-- would give a used id other content is refused (conflicting_turn, nothing
-- written).
CREATE TABLE IF NOT EXISTS foldline_turns (
  conversation TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  claim TEXT NOT NULL,
  PRIMARY KEY (conversation, turn_id)
);
-- Claims of the earlier form (a SHA-256 of the stored message, without the
-- opening bracket): removed here, written again from the events by the
-- migration that follows this script.
DELETE FROM foldline_turns WHERE claim NOT LIKE '[%';

-- The append, in one round trip: checked and written in one statement (its
-- own transaction), all or nothing. Refusals are raised with foldline's own
-- SQLSTATEs: FL001 the fence is stale (lease_lost), FL002 the head moved
-- (conflict; the message is the head found), FL003 a turn id already held
-- with another claim (conflicting_turn; the message is the turn id); a
-- second boundary on one chain slot is the unique index's 23505 (fork).
-- A refusal raised after a write undoes it (the statement's transaction
-- ends in the error). Three statements in the usual case: the head moved
-- (its row lock orders the appenders of one conversation: a second one
-- waits here and then reads the head the first wrote), the turn claims
-- taken (looked at only when one was already there), the events written.
CREATE OR REPLACE FUNCTION foldline_append(
  p_conversation text, p_expected bigint, p_fence bigint,
  p_types text[], p_bodies text[], p_slots text[], p_turns text[], p_claims text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint := coalesce(array_length(p_types, 1), 0);
  head bigint;
  current_fence bigint;
  claimed bigint;
  refused text;
BEGIN
  IF p_fence IS NOT NULL THEN
    SELECT fence INTO current_fence FROM foldline_leases WHERE conversation = p_conversation FOR SHARE;
    IF current_fence IS DISTINCT FROM p_fence THEN
      RAISE EXCEPTION 'lease_lost' USING ERRCODE = 'FL001';
    END IF;
  END IF;
  UPDATE foldline_heads SET seq = seq + n WHERE conversation = p_conversation RETURNING seq - n INTO head;
  IF NOT FOUND THEN
    -- The conversation's first append (one racing it waits on the key).
    INSERT INTO foldline_heads (conversation, seq) VALUES (p_conversation, 0) ON CONFLICT DO NOTHING;
    UPDATE foldline_heads SET seq = seq + n WHERE conversation = p_conversation RETURNING seq - n INTO head;
  END IF;
  IF p_expected IS NOT NULL AND p_expected <> head THEN
    RAISE EXCEPTION '%', head USING ERRCODE = 'FL002';
  END IF;
  IF coalesce(array_length(p_turns, 1), 0) > 0 THEN
    WITH put AS (
      INSERT INTO foldline_turns (conversation, turn_id, claim)
        SELECT p_conversation, g.turn_id, g.claim FROM unnest(p_turns, p_claims) AS g(turn_id, claim)
        ON CONFLICT DO NOTHING RETURNING 1)
    SELECT count(*) INTO claimed FROM put;
    -- A turn id already claimed: the same content again is a redelivery;
    -- other content is refused.
    IF claimed < array_length(p_turns, 1) THEN
      SELECT g.turn_id INTO refused
        FROM unnest(p_turns, p_claims) AS g(turn_id, claim)
        JOIN foldline_turns t ON t.conversation = p_conversation AND t.turn_id = g.turn_id AND t.claim <> g.claim
        LIMIT 1;
      IF refused IS NOT NULL THEN
        RAISE EXCEPTION '%', refused USING ERRCODE = 'FL003';
      END IF;
    END IF;
  END IF;
  INSERT INTO foldline_events (conversation, seq, type, body, chain_slot)
    SELECT p_conversation, head + e.i, e.type, e.body, e.slot
      FROM unnest(p_types, p_bodies, p_slots) WITH ORDINALITY AS e(type, body, slot, i);
  RETURN head + n;
END $$;

CREATE TABLE IF NOT EXISTS foldline_packets (
  conversation TEXT NOT NULL,
  id TEXT NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (conversation, id)
);

-- The writer lease across replicas, with its fencing token.
CREATE TABLE IF NOT EXISTS foldline_leases (
  conversation TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  until_ms BIGINT NOT NULL,
  fence BIGINT NOT NULL
);

-- What `foldline serve` keeps beside the journal.
CREATE TABLE IF NOT EXISTS serve_owners (
  conversation TEXT PRIMARY KEY,
  member TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS serve_tasks (
  conversation TEXT NOT NULL,
  task TEXT NOT NULL,
  member TEXT NOT NULL,
  requested_seq BIGINT NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  PRIMARY KEY (conversation, task)
);
CREATE TABLE IF NOT EXISTS serve_answers (
  conversation TEXT PRIMARY KEY,
  answer TEXT NOT NULL,
  until_ms BIGINT NOT NULL
);

-- Which versions of this schema were applied (the migration's SHA-256): a
-- starting replica that finds its version here applies nothing, so it never
-- takes a lock on the tables that appends wait for.
CREATE TABLE IF NOT EXISTS foldline_schema (
  version TEXT PRIMARY KEY
);

-- A conversation's room: the members its owner let in (they read and post;
-- only the owner condenses and manages the room).
CREATE TABLE IF NOT EXISTS serve_room (
  conversation TEXT NOT NULL,
  member TEXT NOT NULL,
  PRIMARY KEY (conversation, member)
);

-- Member compression (seed 002): each member's opt-ins (JSON, all off when
-- absent), the preferences an answer captured when it took the session (a
-- change applies to runs started after it), and the owner-bound,
-- content-dark stats recorder (one row per pass: ids, tool, status, bytes).
CREATE TABLE IF NOT EXISTS serve_compression (
  member TEXT PRIMARY KEY,
  preferences TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS serve_answer_state (
  conversation TEXT NOT NULL,
  answer TEXT NOT NULL,
  preferences TEXT NOT NULL,
  PRIMARY KEY (conversation, answer)
);
CREATE TABLE IF NOT EXISTS serve_compression_stats (
  member TEXT NOT NULL,
  conversation TEXT NOT NULL,
  pass TEXT NOT NULL,
  tool TEXT NOT NULL,
  status TEXT NOT NULL,
  eligible_bytes BIGINT NOT NULL,
  delivered_bytes BIGINT NOT NULL,
  PRIMARY KEY (member, conversation, pass)
);

-- Compactor progress without inference (seed 000's skipped runs): one row
-- per conversation, overwritten in place — the skipped-run count and the
-- latest content-dark skip record (sizes, and how far it checked). Never an
-- event, so checks below the trigger do not double the journal.
CREATE TABLE IF NOT EXISTS foldline_progress (
  conversation TEXT PRIMARY KEY,
  skipped_runs BIGINT NOT NULL,
  checked_through_seq BIGINT NOT NULL,
  last TEXT NOT NULL
);

-- The manual compactions each member started in the last minute, counted
-- by every replica alike (`--condense-per-minute`): rows older than a
-- minute are removed as new ones are taken.
CREATE TABLE IF NOT EXISTS serve_condense_starts (
  member TEXT NOT NULL,
  at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS serve_condense_starts_member ON serve_condense_starts (member, at_ms);
