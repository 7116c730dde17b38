//! What the server keeps beside the journal, in the same SQLite file: who
//! owns each conversation, and the pointers of manual tasks (so a task the
//! server was running when it stopped is ended when it starts again, and a
//! member reloading a page finds their task by its id).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;

/// A manual task's pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPointer {
    /// The conversation.
    pub conversation: String,
    /// The task id.
    pub task: String,
    /// The member who asked.
    pub member: String,
    /// The journal position of its `requested` event (0 until accepted).
    pub requested_seq: u64,
    /// `pending`, `accepted`, `refused` or `done`.
    pub state: String,
}

/// Ownership and task pointers.
pub struct Store {
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA busy_timeout = 10000;
CREATE TABLE IF NOT EXISTS serve_owners (
  conversation TEXT PRIMARY KEY,
  member TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS serve_tasks (
  conversation TEXT NOT NULL,
  task TEXT NOT NULL,
  member TEXT NOT NULL,
  requested_seq INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  PRIMARY KEY (conversation, task)
);
";

impl Store {
    /// Open (and create) the tables in the journal's file.
    ///
    /// # Errors
    /// Storage failures.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Ok(Store {
            conn: crate::journal::open_with(path, SCHEMA)?,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        super::state::lock(&self.conn)
    }

    /// The owner of a conversation, if it exists.
    ///
    /// # Errors
    /// Storage failures.
    pub fn owner(&self, conversation: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT member FROM serve_owners WHERE conversation = ?1",
                params![conversation],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The owner, making `member` the owner of a new conversation.
    ///
    /// # Errors
    /// Storage failures.
    pub fn claim(&self, conversation: &str, member: &str) -> Result<String> {
        let conn = self.conn();
        conn.execute(
            "INSERT OR IGNORE INTO serve_owners (conversation, member) VALUES (?1, ?2)",
            params![conversation, member],
        )?;
        Ok(conn.query_row(
            "SELECT member FROM serve_owners WHERE conversation = ?1",
            params![conversation],
            |r| r.get(0),
        )?)
    }

    /// Record a new task pointer (`pending`).
    ///
    /// # Errors
    /// Storage failures.
    pub fn add_task(&self, conversation: &str, task: &str, member: &str) -> Result<()> {
        self.conn().execute(
            "INSERT INTO serve_tasks (conversation, task, member, state) VALUES (?1, ?2, ?3, 'pending')",
            params![conversation, task, member],
        )?;
        Ok(())
    }

    /// Move a task pointer to `state` (and its `requested` position, when known).
    ///
    /// # Errors
    /// Storage failures.
    pub fn set_task(
        &self,
        conversation: &str,
        task: &str,
        state: &str,
        requested_seq: Option<u64>,
    ) -> Result<()> {
        self.conn().execute(
            "UPDATE serve_tasks SET state = ?3, requested_seq = COALESCE(?4, requested_seq)
             WHERE conversation = ?1 AND task = ?2",
            params![conversation, task, state, requested_seq.map(|s| s as i64)],
        )?;
        Ok(())
    }

    /// A task pointer.
    ///
    /// # Errors
    /// Storage failures.
    pub fn task(&self, conversation: &str, task: &str) -> Result<Option<TaskPointer>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT conversation, task, member, requested_seq, state FROM serve_tasks
                 WHERE conversation = ?1 AND task = ?2",
                params![conversation, task],
                row,
            )
            .optional()?)
    }

    /// Tasks that were pending or accepted and never ended here (the server
    /// stopped while running them).
    ///
    /// # Errors
    /// Storage failures.
    pub fn open_tasks(&self) -> Result<Vec<TaskPointer>> {
        let conn = self.conn();
        let mut st = conn.prepare(
            "SELECT conversation, task, member, requested_seq, state FROM serve_tasks
             WHERE state IN ('pending', 'accepted') ORDER BY conversation, task",
        )?;
        let rows = st.query_map([], row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskPointer> {
    Ok(TaskPointer {
        conversation: r.get(0)?,
        task: r.get(1)?,
        member: r.get(2)?,
        requested_seq: r.get::<_, i64>(3)? as u64,
        state: r.get(4)?,
    })
}
