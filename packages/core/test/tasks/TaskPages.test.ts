/**
 * A page of tasks on the real stores, for every filter a list can carry, against the stored rows
 * read back in order. On PostgreSQL the pages of the default size and the board's have statements
 * of their own with the size in the text (so that PostgreSQL may keep one plan for them): those
 * must answer exactly what the parameterized page answers, and PostgreSQL must in fact keep their
 * plans, a later page's included on a store where one owner holds most of the tasks.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ProjectId, TaskPriority, TaskStatus } from "@taskwright/domain"
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { migrate } from "../../src/store/migrations.js"
import * as SqliteStore from "../../src/store/SqliteStore.js"
import { JsonText, LATER, type Store, StoreTag, statement } from "../../src/store/Store.js"
import { type TaskFilter, type TasksPage, TasksRepo } from "../../src/tasks/TasksRepo.js"
import { createPgDatabase, dropPgDatabase, storeKinds } from "../stores.js"

const owners = ["usr_pages_ada00000000", "usr_pages_bob00000000"]
const projects = ["proj_pages_one000000", "proj_pages_two000000"] as Array<ProjectId>
const statuses: ReadonlyArray<TaskStatus> = ["backlog", "todo", "in_progress", "done"]
const priorities: ReadonlyArray<TaskPriority> = ["low", "medium", "high", "urgent"]
const TASKS = 700

interface Stored {
  readonly id: number
  readonly owner_id: string
  readonly project_id: string | null
  readonly status: string
  readonly priority: string
}

/** Every filter: with and without an owner, status, priority and project. */
const filters: ReadonlyArray<TaskFilter> = [null, owners[0] ?? ""].flatMap((ownerId) =>
  [undefined, "todo" as const].flatMap((status) =>
    [undefined, "high" as const].flatMap((priority) =>
      [undefined, projects[1]].map((projectId) => ({ ownerId, status, priority, projectId }))
    )
  )
)

const idsOf = (page: TasksPage): Array<number> =>
  (page.tasks instanceof JsonText ? (JSON.parse(page.tasks.text) as Array<{ id: number }>) : page.tasks).map((t) =>
    Number(t.id)
  )

const describeFilter = (f: TaskFilter) =>
  Object.entries(f)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ") || "no filter"

describe.each(storeKinds)("a page of tasks on %s", (kind) => {
  const dir = mkdtempSync(join(tmpdir(), "tw-task-pages-"))
  let pgUrl = ""
  let runtime: ManagedRuntime.ManagedRuntime<TasksRepo | StoreTag, unknown>
  let stored: ReadonlyArray<Stored> = []

  const run = <A, E>(effect: Effect.Effect<A, E, TasksRepo | StoreTag>) => runtime.runPromise(effect)

  beforeAll(async () => {
    // One connection on PostgreSQL, so the test reads the plans of the connection the pages ran on.
    let base: Layer.Layer<StoreTag, unknown>
    if (kind === "postgres") {
      pgUrl = await createPgDatabase("tw_task_pages")
      const Pg = await import("../../src/store/PgStore.js")
      base = Layer.tap(Pg.layer({ url: pgUrl, maxConnections: 1 }), (ctx) => Effect.orDie(Effect.provide(migrate, ctx)))
    } else {
      base = Layer.tap(SqliteStore.layer({ filename: join(dir, "pages.db") }), (ctx) =>
        Effect.orDie(Effect.provide(migrate, ctx))
      )
    }
    runtime = ManagedRuntime.make(TasksRepo.Default.pipe(Layer.provideMerge(base)))
    const at = "2026-12-01T00:00:00.000Z"
    await run(
      Effect.flatMap(StoreTag, (store) =>
        store.transaction(
          Effect.gen(function* () {
            for (const [i, id] of owners.entries()) {
              yield* store.run(
                statement(
                  "test.user",
                  "INSERT INTO users (id, email, email_lower, name, is_admin, created_at, updated_at) VALUES (?, ?, ?, ?, false, ?, ?)"
                ),
                [id, `u${i}@example.test`, `u${i}@example.test`, `User ${i}`, at, at]
              )
            }
            for (const [i, id] of projects.entries()) {
              yield* store.run(
                statement(
                  "test.project",
                  "INSERT INTO projects (id, owner_id, name, path, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
                ),
                [id, owners[0] ?? "", `Project ${i}`, `/tmp/p${i}`, at, at]
              )
            }
            // A spread that is not periodic in the filters, so every page mixes owners and statuses.
            for (let i = 0; i < TASKS; i++) {
              yield* store.run(
                statement(
                  "test.task",
                  "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES (?, ?, ?, '', ?, ?, '[]', ?, ?)"
                ),
                [
                  owners[i % 7 === 0 ? 1 : 0] ?? "",
                  i % 3 === 0 ? null : (projects[i % 5 === 0 ? 0 : 1] ?? null),
                  `task ${i}`,
                  statuses[(i * 7) % 11 < 4 ? (i * 7) % 11 : 1] ?? "todo",
                  priorities[(i * 5) % 13 < 4 ? (i * 5) % 13 : 2] ?? "high",
                  at,
                  at
                ]
              )
            }
          })
        )
      )
    )
    stored = (
      await run(
        Effect.flatMap(StoreTag, (store) =>
          store.all(
            statement<Stored>(
              "test.stored",
              "SELECT id, owner_id, project_id, status, priority FROM tasks ORDER BY id DESC"
            )
          )
        )
      )
    ).map((row) => ({ ...row, id: Number(row.id) }))
  })
  afterAll(async () => {
    await runtime?.dispose()
    rmSync(dir, { recursive: true, force: true })
    if (kind === "postgres") await dropPgDatabase(pgUrl)
  })

  const expected = (f: TaskFilter, limit: number, offset: number) => {
    const matching = stored.filter(
      (t) =>
        (f.ownerId === null || t.owner_id === f.ownerId) &&
        (f.status === undefined || t.status === f.status) &&
        (f.priority === undefined || t.priority === f.priority) &&
        (f.projectId === undefined || t.project_id === f.projectId)
    )
    return { ids: matching.slice(offset, offset + limit).map((t) => t.id), total: matching.length }
  }

  // The first pages of the sizes with statements of their own, their neighbours, and pages past them.
  const shapes: ReadonlyArray<readonly [number, number]> = [
    [50, 0],
    [200, 0],
    [49, 0],
    [51, 0],
    [50, 1],
    [200, 200],
    [50, 10_000]
  ]

  it.each(filters.map((f) => [describeFilter(f), f] as const))(
    "%s: every page shape answers the stored tasks in order, with the filter's total",
    async (_, filter) => {
      const matching = expected(filter, TASKS, 0).total
      expect(matching).toBeGreaterThan(0)
      for (const [limit, offset] of shapes) {
        const want = expected(filter, limit, offset)
        const page = await run(Effect.flatMap(TasksRepo, (repo) => repo.page(filter, limit, offset)))
        expect({ ids: idsOf(page), total: page.total }, `${limit}@${offset}`).toEqual(want)
        // The answer without a fiber: the same page (JSON text on SQLite).
        const direct = await run(Effect.map(TasksRepo, (repo) => repo.pageNow(filter, limit, offset)))
        if (direct === LATER) throw new Error("the store answered later")
        const now = await direct
        if (!Exit.isSuccess(now)) throw new Error(`the page failed: ${now.cause}`)
        expect({ ids: idsOf(now.value), total: now.value.total }, `now ${limit}@${offset}`).toEqual(want)
      }
    }
  )

  it.runIf(kind === "postgres")(
    "PostgreSQL keeps one plan for a page of the common sizes, first or later",
    async () => {
      // The small owner (a seventh of the tasks) on analysed tables: a plan made for its values looks
      // cheaper than the generic one, which is costed for an average owner.
      await run(Effect.flatMap(StoreTag, (store: Store) => store.run(statement("test.analyze", "ANALYZE"), [])))
      const owner = owners[1] ?? ""
      const forms: ReadonlyArray<TaskFilter> = [
        { ownerId: owner, status: "todo", priority: undefined, projectId: undefined },
        { ownerId: owner, status: undefined, priority: undefined, projectId: undefined },
        { ownerId: null, status: undefined, priority: "high", projectId: undefined }
      ]
      for (const filter of forms) {
        for (let i = 0; i < 10; i++) {
          await run(Effect.flatMap(TasksRepo, (repo) => repo.page(filter, 50, 0)))
          await run(Effect.flatMap(TasksRepo, (repo) => repo.page(filter, 200, 0)))
          await run(Effect.flatMap(TasksRepo, (repo) => repo.page(filter, 50, 10)))
        }
      }
      const plans = await run(
        Effect.flatMap(StoreTag, (store: Store) =>
          store.all(
            statement<{ name: string; generic_plans: number; custom_plans: number }>(
              "test.plans",
              "-- PostgreSQL only",
              "SELECT name, generic_plans::int AS generic_plans, custom_plans::int AS custom_plans FROM pg_prepared_statements WHERE name LIKE 'tasks.listWithTotal.%' ORDER BY name"
            )
          )
        )
      )
      const byName = new Map(plans.map((p) => [p.name, p]))
      for (const key of ["os", "o", "p"]) {
        for (const size of [50, 200]) {
          const first = byName.get(`tasks.listWithTotal.${key}.first${size}`)
          expect(first, `${key} first ${size}`).toBeDefined()
          // Five plans made for the values, then the generic one kept.
          expect(first?.custom_plans, `${key} first ${size}`).toBe(5)
          expect(first?.generic_plans, `${key} first ${size}`).toBeGreaterThanOrEqual(5)
        }
        // A later page too, however the owners' tasks are spread: five custom plans, then the generic.
        const later = byName.get(`tasks.listWithTotal.${key}.sized50`)
        expect(later, `${key} later`).toBeDefined()
        expect(later?.custom_plans, `${key} later`).toBe(5)
        expect(later?.generic_plans, `${key} later`).toBeGreaterThanOrEqual(5)
      }
    }
  )
})
