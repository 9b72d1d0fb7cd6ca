//! sqlx, a database pool whose connections and timeouts run on tokio (its
//! `runtime-tokio` feature): an in-memory SQLite database used from many
//! fairlane tasks.

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::Row;
use std::str::FromStr;

use crate::common::assert_on_fairlane_task;

/// Creates a table, inserts from many fairlane tasks at once, reads the
/// rows back and closes the pool.
async fn insert_from_many_tasks() {
    const TASKS: i64 = 16;
    const ROWS: i64 = 8;
    // A fresh in-memory database, shared by the pool's connections.
    let options = SqliteConnectOptions::from_str("sqlite::memory:").unwrap();
    let pool = fairlane::spawn(async move {
        assert_on_fairlane_task();
        SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .unwrap()
    })
    .await
    .unwrap();
    sqlx::query("CREATE TABLE visits (task INTEGER NOT NULL, row INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let pool = pool.clone();
            fairlane::spawn(async move {
                assert_on_fairlane_task();
                for r in 0..ROWS {
                    sqlx::query("INSERT INTO visits (task, row) VALUES (?, ?)")
                        .bind(t)
                        .bind(r)
                        .execute(&pool)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let reader = pool.clone();
    let (count, sum): (i64, i64) = fairlane::spawn(async move {
        assert_on_fairlane_task();
        let row = sqlx::query("SELECT COUNT(*), SUM(task * 100 + row) FROM visits")
            .fetch_one(&reader)
            .await
            .unwrap();
        (row.get(0), row.get(1))
    })
    .await
    .unwrap();
    assert_eq!(count, TASKS * ROWS);
    let expected: i64 = (0..TASKS)
        .flat_map(|t| (0..ROWS).map(move |r| t * 100 + r))
        .sum();
    assert_eq!(sum, expected);
    let per_task: Vec<(i64, i64)> =
        sqlx::query_as("SELECT task, COUNT(*) FROM visits GROUP BY task ORDER BY task")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(per_task, (0..TASKS).map(|t| (t, ROWS)).collect::<Vec<_>>());
    pool.close().await;
    assert!(pool.is_closed());
    assert!(sqlx::query("SELECT 1").execute(&pool).await.is_err());
}

#[fairlane::test(processors = 2)]
async fn pool_from_many_tasks_multi_thread() {
    insert_from_many_tasks().await;
}

#[fairlane::test(flavor = "current_thread")]
async fn pool_from_many_tasks_current_thread() {
    insert_from_many_tasks().await;
}
