/**
 * The schema, one migration set per dialect (kept side by side so they cannot drift apart
 * unnoticed). Loaded with `Migrator.fromRecord`, so a bundled build needs no files at run time.
 *
 * Timestamps are ISO 8601 text in both dialects: the wire format, sortable, and identical on
 * both engines. `task_counts` is maintained by triggers so a list's `total` is a handful of
 * index reads, not a count over a million rows.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { Dialect } from "./Store.js"

type Ddl = Record<Dialect, ReadonlyArray<string>>

const initial: Ddl = {
  sqlite: [
    `CREATE TABLE users (
      id TEXT PRIMARY KEY,
      email TEXT NOT NULL,
      email_lower TEXT NOT NULL UNIQUE,
      name TEXT NOT NULL,
      password_hash TEXT,
      is_admin INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      secret_hash TEXT NOT NULL UNIQUE,
      prefix TEXT NOT NULL,
      scopes TEXT NOT NULL,
      created_at TEXT NOT NULL,
      expires_at TEXT,
      revoked_at TEXT,
      last_used_at TEXT,
      last_used_ip TEXT,
      total_requests INTEGER NOT NULL DEFAULT 0
    )`,
    `CREATE INDEX api_keys_user ON api_keys (user_id)`,
    `CREATE TABLE projects (
      id TEXT PRIMARY KEY,
      owner_id TEXT NOT NULL REFERENCES users(id),
      name TEXT NOT NULL,
      path TEXT NOT NULL,
      git_url TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX projects_owner ON projects (owner_id, created_at)`,
    `CREATE TABLE labels (
      id TEXT PRIMARY KEY,
      owner_id TEXT NOT NULL REFERENCES users(id),
      name TEXT NOT NULL,
      name_lower TEXT NOT NULL,
      color TEXT NOT NULL,
      created_at TEXT NOT NULL,
      UNIQUE (owner_id, name_lower)
    )`,
    `CREATE TABLE tasks (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      owner_id TEXT NOT NULL REFERENCES users(id),
      project_id TEXT REFERENCES projects(id),
      title TEXT NOT NULL,
      description TEXT NOT NULL DEFAULT '',
      status TEXT NOT NULL,
      priority TEXT NOT NULL,
      labels TEXT NOT NULL DEFAULT '[]',
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX tasks_owner ON tasks (owner_id, id)`,
    `CREATE INDEX tasks_owner_status ON tasks (owner_id, status, id)`,
    `CREATE INDEX tasks_owner_priority ON tasks (owner_id, priority, id)`,
    `CREATE INDEX tasks_project ON tasks (project_id, id)`,
    `CREATE INDEX tasks_status ON tasks (status, id)`,
    `CREATE INDEX tasks_priority ON tasks (priority, id)`,
    `CREATE TABLE task_counts (
      owner_id TEXT NOT NULL,
      project_id TEXT NOT NULL,
      status TEXT NOT NULL,
      priority TEXT NOT NULL,
      n INTEGER NOT NULL,
      PRIMARY KEY (owner_id, project_id, status, priority)
    )`,
    `CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN
      INSERT INTO task_counts (owner_id, project_id, status, priority, n)
      VALUES (NEW.owner_id, COALESCE(NEW.project_id, ''), NEW.status, NEW.priority, 1)
      ON CONFLICT (owner_id, project_id, status, priority) DO UPDATE SET n = n + 1;
    END`,
    `CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks BEGIN
      UPDATE task_counts SET n = n - 1
      WHERE owner_id = OLD.owner_id AND project_id = COALESCE(OLD.project_id, '')
        AND status = OLD.status AND priority = OLD.priority;
    END`,
    `CREATE TRIGGER tasks_count_update AFTER UPDATE OF owner_id, project_id, status, priority ON tasks BEGIN
      UPDATE task_counts SET n = n - 1
      WHERE owner_id = OLD.owner_id AND project_id = COALESCE(OLD.project_id, '')
        AND status = OLD.status AND priority = OLD.priority;
      INSERT INTO task_counts (owner_id, project_id, status, priority, n)
      VALUES (NEW.owner_id, COALESCE(NEW.project_id, ''), NEW.status, NEW.priority, 1)
      ON CONFLICT (owner_id, project_id, status, priority) DO UPDATE SET n = n + 1;
    END`,
    `CREATE TABLE runs (
      id TEXT PRIMARY KEY,
      task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
      owner_id TEXT NOT NULL,
      agent TEXT NOT NULL,
      autonomy TEXT NOT NULL,
      branch TEXT NOT NULL,
      status TEXT NOT NULL,
      started_at TEXT NOT NULL,
      completed_at TEXT,
      output TEXT NOT NULL DEFAULT '{}'
    )`,
    `CREATE INDEX runs_task ON runs (task_id, started_at)`,
    `CREATE INDEX runs_status ON runs (status)`,
    `CREATE TABLE run_logs (
      run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      timestamp TEXT NOT NULL,
      level TEXT NOT NULL,
      message TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    )`,
    `CREATE INDEX run_logs_time ON run_logs (run_id, timestamp, seq)`,
    `CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`
  ],
  pg: [
    `CREATE TABLE users (
      id TEXT PRIMARY KEY,
      email TEXT NOT NULL,
      email_lower TEXT NOT NULL UNIQUE,
      name TEXT NOT NULL,
      password_hash TEXT,
      is_admin BOOLEAN NOT NULL DEFAULT FALSE,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      secret_hash TEXT NOT NULL UNIQUE,
      prefix TEXT NOT NULL,
      scopes TEXT NOT NULL,
      created_at TEXT NOT NULL,
      expires_at TEXT,
      revoked_at TEXT,
      last_used_at TEXT,
      last_used_ip TEXT,
      total_requests BIGINT NOT NULL DEFAULT 0
    )`,
    `CREATE INDEX api_keys_user ON api_keys (user_id)`,
    `CREATE TABLE projects (
      id TEXT PRIMARY KEY,
      owner_id TEXT NOT NULL REFERENCES users(id),
      name TEXT NOT NULL,
      path TEXT NOT NULL,
      git_url TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX projects_owner ON projects (owner_id, created_at)`,
    `CREATE TABLE labels (
      id TEXT PRIMARY KEY,
      owner_id TEXT NOT NULL REFERENCES users(id),
      name TEXT NOT NULL,
      name_lower TEXT NOT NULL,
      color TEXT NOT NULL,
      created_at TEXT NOT NULL,
      UNIQUE (owner_id, name_lower)
    )`,
    `CREATE TABLE tasks (
      id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      owner_id TEXT NOT NULL REFERENCES users(id),
      project_id TEXT REFERENCES projects(id),
      title TEXT NOT NULL,
      description TEXT NOT NULL DEFAULT '',
      status TEXT NOT NULL,
      priority TEXT NOT NULL,
      labels TEXT NOT NULL DEFAULT '[]',
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX tasks_owner ON tasks (owner_id, id)`,
    `CREATE INDEX tasks_owner_status ON tasks (owner_id, status, id)`,
    `CREATE INDEX tasks_owner_priority ON tasks (owner_id, priority, id)`,
    `CREATE INDEX tasks_project ON tasks (project_id, id)`,
    `CREATE INDEX tasks_status ON tasks (status, id)`,
    `CREATE INDEX tasks_priority ON tasks (priority, id)`,
    `CREATE TABLE task_counts (
      owner_id TEXT NOT NULL,
      project_id TEXT NOT NULL,
      status TEXT NOT NULL,
      priority TEXT NOT NULL,
      n BIGINT NOT NULL,
      PRIMARY KEY (owner_id, project_id, status, priority)
    )`,
    `CREATE FUNCTION taskwright_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE task_counts SET n = n - 1
        WHERE owner_id = OLD.owner_id AND project_id = COALESCE(OLD.project_id, '')
          AND status = OLD.status AND priority = OLD.priority;
      END IF;
      IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO task_counts (owner_id, project_id, status, priority, n)
        VALUES (NEW.owner_id, COALESCE(NEW.project_id, ''), NEW.status, NEW.priority, 1)
        ON CONFLICT (owner_id, project_id, status, priority) DO UPDATE SET n = task_counts.n + 1;
      END IF;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER tasks_count_insert_delete AFTER INSERT OR DELETE ON tasks
      FOR EACH ROW EXECUTE FUNCTION taskwright_task_counts()`,
    `CREATE TRIGGER tasks_count_update AFTER UPDATE OF owner_id, project_id, status, priority ON tasks
      FOR EACH ROW EXECUTE FUNCTION taskwright_task_counts()`,
    `CREATE TABLE runs (
      id TEXT PRIMARY KEY,
      task_id BIGINT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
      owner_id TEXT NOT NULL,
      agent TEXT NOT NULL,
      autonomy TEXT NOT NULL,
      branch TEXT NOT NULL,
      status TEXT NOT NULL,
      started_at TEXT NOT NULL,
      completed_at TEXT,
      output TEXT NOT NULL DEFAULT '{}'
    )`,
    `CREATE INDEX runs_task ON runs (task_id, started_at)`,
    `CREATE INDEX runs_status ON runs (status)`,
    `CREATE TABLE run_logs (
      run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      seq BIGINT NOT NULL,
      timestamp TEXT NOT NULL,
      level TEXT NOT NULL,
      message TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    )`,
    `CREATE INDEX run_logs_time ON run_logs (run_id, timestamp, seq)`,
    `CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`
  ]
}

/**
 * Authentication: browser sessions, the jti → key mapping of access tokens (so a revoked or
 * rotated key's tokens stop working), per-day key usage, and fixed-window rate-limit counters
 * (UNLOGGED on PostgreSQL: they are worth nothing after a crash and cost no WAL).
 */
const auth: Ddl = {
  sqlite: [
    `CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      token_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL
    )`,
    `CREATE INDEX sessions_user ON sessions (user_id)`,
    `CREATE INDEX sessions_expiry ON sessions (expires_at)`,
    `CREATE TABLE access_tokens (
      jti TEXT PRIMARY KEY,
      key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      expires_at TEXT NOT NULL
    )`,
    `CREATE INDEX access_tokens_key ON access_tokens (key_id)`,
    `CREATE INDEX access_tokens_expiry ON access_tokens (expires_at)`,
    `CREATE TABLE api_key_usage (
      key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      day TEXT NOT NULL,
      count INTEGER NOT NULL,
      PRIMARY KEY (key_id, day)
    )`,
    `CREATE TABLE rate_limits (
      bucket TEXT PRIMARY KEY,
      window_start INTEGER NOT NULL,
      count INTEGER NOT NULL
    )`
  ],
  pg: [
    `CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      token_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL
    )`,
    `CREATE INDEX sessions_user ON sessions (user_id)`,
    `CREATE INDEX sessions_expiry ON sessions (expires_at)`,
    `CREATE TABLE access_tokens (
      jti TEXT PRIMARY KEY,
      key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      expires_at TEXT NOT NULL
    )`,
    `CREATE INDEX access_tokens_key ON access_tokens (key_id)`,
    `CREATE INDEX access_tokens_expiry ON access_tokens (expires_at)`,
    `CREATE TABLE api_key_usage (
      key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      day TEXT NOT NULL,
      count BIGINT NOT NULL,
      PRIMARY KEY (key_id, day)
    )`,
    `CREATE UNLOGGED TABLE rate_limits (
      bucket TEXT PRIMARY KEY,
      window_start BIGINT NOT NULL,
      count BIGINT NOT NULL
    )`
  ]
}

/**
 * Agent runs: what the supervisor needs to find a run's work again after a restart (the
 * repository, the worktree, the base commit and the agent's process group), why a run failed,
 * at most one running run per task (enforced by the store, also across service processes), and
 * task reviews.
 */
const runs: Ddl = {
  sqlite: [
    `ALTER TABLE runs ADD COLUMN repo_path TEXT`,
    `ALTER TABLE runs ADD COLUMN worktree_path TEXT`,
    `ALTER TABLE runs ADD COLUMN base_sha TEXT`,
    `ALTER TABLE runs ADD COLUMN pid INTEGER`,
    `ALTER TABLE runs ADD COLUMN error TEXT`,
    `CREATE UNIQUE INDEX runs_one_running_per_task ON runs (task_id) WHERE status = 'running'`,
    `CREATE TABLE reviews (
      id TEXT PRIMARY KEY,
      task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
      action TEXT NOT NULL,
      comment TEXT,
      reviewer TEXT NOT NULL,
      run_id TEXT,
      created_at TEXT NOT NULL
    )`,
    `CREATE INDEX reviews_task ON reviews (task_id, created_at)`
  ],
  pg: [
    `ALTER TABLE runs ADD COLUMN repo_path TEXT`,
    `ALTER TABLE runs ADD COLUMN worktree_path TEXT`,
    `ALTER TABLE runs ADD COLUMN base_sha TEXT`,
    `ALTER TABLE runs ADD COLUMN pid INTEGER`,
    `ALTER TABLE runs ADD COLUMN error TEXT`,
    `CREATE UNIQUE INDEX runs_one_running_per_task ON runs (task_id) WHERE status = 'running'`,
    `CREATE TABLE reviews (
      id TEXT PRIMARY KEY,
      task_id BIGINT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
      action TEXT NOT NULL,
      comment TEXT,
      reviewer TEXT NOT NULL,
      run_id TEXT,
      created_at TEXT NOT NULL
    )`,
    `CREATE INDEX reviews_task ON reviews (task_id, created_at)`
  ]
}

const migration = (ddl: Ddl) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const statements = sql.onDialectOrElse({ pg: () => ddl.pg, orElse: () => ddl.sqlite })
    for (const text of statements) yield* sql.unsafe(text)
  })

/** Every migration, in order. New ones are appended with the next number; shipped ones never change. */
export const migrations = Migrator.fromRecord({
  "0001_initial": migration(initial),
  "0002_auth": migration(auth),
  "0003_runs": migration(runs)
})

const runMigrator = Migrator.make({})

/** Brings the schema up to date; answers the migrations it applied. */
export const migrate = runMigrator({ loader: migrations, table: "taskwright_migrations" })
