"""Ordered ledger migrations keyed by PRAGMA user_version; append new ones, never edit a released one."""

from __future__ import annotations

# Migration N (1-based) takes a ledger from user_version N-1 to N. The state lists are literal on purpose:
# a migration must mean the same thing forever, whatever later code does to the enums.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        controller_target TEXT NOT NULL,
        session TEXT,
        organization TEXT,
        repo TEXT,
        repo_path TEXT,
        base_ref TEXT,
        base_sha TEXT,
        plan_path TEXT,
        status TEXT NOT NULL CHECK (status IN ('active', 'interrupted', 'finished')),
        stopped_at TEXT,
        verdict TEXT CHECK (verdict IN ('PASS', 'PARTIAL', 'FAIL')),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;

    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        received_at TEXT NOT NULL,
        source TEXT NOT NULL,
        raw TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'kept_aside')),
        reason_code TEXT,
        reason TEXT,
        task_label TEXT,
        kind TEXT,
        sender TEXT,
        fingerprint TEXT NOT NULL,
        handled_at TEXT
    ) STRICT;
    -- The same message may arrive twice (resent callback, two transports); only one copy may be acted on.
    CREATE UNIQUE INDEX inbox_accepted_once ON inbox (run_id, fingerprint) WHERE verdict = 'accepted';
    CREATE INDEX inbox_by_run ON inbox (run_id, id);

    CREATE TABLE workers (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        task_label TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN (
            'provisioning', 'ready', 'dispatched', 'working', 'question', 'blocked', 'result', 'verifying',
            'accepted', 'rejected', 'superseded', 'failed', 'retiring', 'retired', 'retained')),
        objective TEXT NOT NULL,
        claimed_files TEXT NOT NULL DEFAULT '[]',
        pane_id TEXT,
        reply_target TEXT,
        last_callback_id INTEGER REFERENCES inbox (id),
        pending_question TEXT,
        reported_checks TEXT,
        controller_verification TEXT,
        final_disposition TEXT CHECK (final_disposition IN ('accepted', 'rejected', 'superseded', 'blocked', 'failed')),
        branch TEXT,
        worktree_path TEXT,
        tab_label TEXT,
        workspace_id TEXT,
        tab_id TEXT,
        created_workspace_ids TEXT NOT NULL DEFAULT '[]',
        created_pane_ids TEXT NOT NULL DEFAULT '[]',
        created_worktree_paths TEXT NOT NULL DEFAULT '[]',
        base_sha TEXT,
        head_sha TEXT,
        integrated_sha TEXT,
        last_state_change_seq INTEGER,
        unchanged_check_ins INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (run_id, task_label),
        UNIQUE (run_id, name)
    ) STRICT;

    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        task_label TEXT,
        at TEXT NOT NULL,
        kind TEXT NOT NULL,
        from_state TEXT,
        to_state TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        FOREIGN KEY (run_id, task_label) REFERENCES workers (run_id, task_label)
    ) STRICT;
    CREATE INDEX events_by_run ON events (run_id, seq);
    -- The journal is the audit trail the report is computed from: nothing may rewrite history.
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

    CREATE TABLE effects (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        task_label TEXT,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('intended', 'confirmed', 'failed', 'abandoned')),
        request TEXT NOT NULL,
        response TEXT,
        error TEXT,
        intended_at TEXT NOT NULL,
        settled_at TEXT,
        UNIQUE (run_id, key),
        FOREIGN KEY (run_id, task_label) REFERENCES workers (run_id, task_label)
    ) STRICT;
    CREATE INDEX effects_in_flight ON effects (run_id, status);
    """,
    # 2: where the run lives in herdr, found or created by preflight and reused by every later phase.
    """
    ALTER TABLE runs ADD COLUMN workspace_id TEXT;
    ALTER TABLE runs ADD COLUMN repo_tab_id TEXT;
    ALTER TABLE runs ADD COLUMN controller_workspace_id TEXT;
    ALTER TABLE runs ADD COLUMN controller_tab_id TEXT;
    ALTER TABLE runs ADD COLUMN default_branch TEXT;
    ALTER TABLE runs ADD COLUMN created_workspace_ids TEXT NOT NULL DEFAULT '[]';
    """,
    # 3: who drives the run: an agent controller (workers call back with `herdr agent prompt`) or the
    # `orch run` process (workers call `orch inbox add`); a run is resumed only by the kind that dispatched it.
    # Runs recorded before this migration never said, and `orch resume` then continued any of them: they keep that
    # meaning (`run`) unless their own inbox shows an agent controller, which handed every callback over with
    # `--source prompt` (SKILL.md). The UPDATE was added after release (issue 21: the bare default made an
    # interrupted `orch run` run agent-driven, and resume refused it); the DDL is unchanged, and it touches only
    # rows that existed before the column did.
    """
    ALTER TABLE runs ADD COLUMN controller_kind TEXT NOT NULL DEFAULT 'agent' CHECK (controller_kind IN ('agent', 'run'));
    UPDATE runs SET controller_kind = 'run' WHERE run_id NOT IN (SELECT run_id FROM inbox WHERE source = 'prompt');
    """,
    # 4: a worker may wait `queued` for a slot or a predecessor, and be `skipped` when a predecessor ended without
    # acceptance. Widening a CHECK changes no stored row, so the table is not rebuilt (rebuilding would break the
    # journal's and effects' foreign keys): its CREATE text is edited in place (SQLite's documented procedure for
    # constraint changes that leave the content valid), and RESET makes this connection re-read the schema.
    """
    PRAGMA writable_schema = ON;
    UPDATE sqlite_schema
        SET sql = replace(sql, '''retiring'', ''retired'', ''retained''))', '''retiring'', ''retired'', ''retained'', ''queued'', ''skipped''))')
        WHERE type = 'table' AND name = 'workers';
    PRAGMA writable_schema = RESET;
    """,
    # 5: the machine each worker runs on (issue 26: fleets across machines), by the plan's host name; every herdr id
    # on the worker (pane, workspace, tab, reply target) is that host's, never compared with another host's. Every
    # worker recorded before ran on the controller, which is what the default says: old runs keep their meaning.
    """
    ALTER TABLE workers ADD COLUMN host TEXT NOT NULL DEFAULT 'local';
    """,
    # 6: a message collected from another host's spool names its one delivery in its source (`spool:<host>:<entry id>`),
    # and is recorded once per run, whatever process collects it: until now only the run's driver lock kept two
    # collections apart. A file written before could hold a twin only if two collections overlapped outside that lock;
    # such a twin is kept (never deleted), its source marked with its own id so that the index can be built.
    """
    UPDATE inbox SET source = source || ' (again: #' || id || ')'
        WHERE substr(source, 1, 6) = 'spool:'
          AND id > (SELECT MIN(f.id) FROM inbox f WHERE f.run_id = inbox.run_id AND f.source = inbox.source);
    CREATE UNIQUE INDEX inbox_spooled_once ON inbox (run_id, source) WHERE substr(source, 1, 6) = 'spool:';
    """,
)
