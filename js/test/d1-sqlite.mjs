// A D1 binding over Node's own SQLite (`node:sqlite`), for running the
// README's worker example under Node: statements bound and run as D1's
// are, and a batch as one transaction that commits whole or rolls back
// (D1's rule). The D1 stores are tested against miniflare's real D1 in
// test/workerd/run.mjs; this stands in where no workerd runs.
import { DatabaseSync } from "node:sqlite";

export function sqliteD1(path = ":memory:") {
  const db = new DatabaseSync(path);
  const rows = (sql, values) => db.prepare(sql).all(...values);
  const statement = (sql, values = []) => ({
    sql,
    values,
    bind: (...v) => statement(sql, v),
    all: async () => ({ results: rows(sql, values) }),
    run: async () => ({ results: rows(sql, values), success: true }),
  });
  return {
    prepare: (sql) => statement(sql),
    async batch(list) {
      db.exec("BEGIN IMMEDIATE");
      try {
        const out = list.map((s) => ({ results: rows(s.sql, s.values) }));
        db.exec("COMMIT");
        return out;
      } catch (e) {
        db.exec("ROLLBACK");
        throw e;
      }
    },
  };
}
