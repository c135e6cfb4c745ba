-- dsh sessions in PostgreSQL, version 1.
-- One row per session: its header line verbatim, the seq its next event gets, and the lease
-- (a fencing token, the holder, the holder's backend and when the lease expires).
CREATE TABLE dsh_sessions (
    id            text PRIMARY KEY,
    header        text        NOT NULL,
    next_seq      bigint      NOT NULL DEFAULT 0 CHECK (next_seq >= 0),
    lease_token   bigint      NOT NULL DEFAULT 0,
    lease_owner   text,
    lease_backend integer,
    lease_until   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per log line: the canonical line text, keyed by the seq of its (first) event.
CREATE TABLE dsh_events (
    session_id text   NOT NULL REFERENCES dsh_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq >= 0),
    line       text   NOT NULL,
    PRIMARY KEY (session_id, seq)
);
