//! Crates built on tokio, each in the smallest realistic program, run from
//! fairlane tasks through the tokio bridge (feature `tokio-compat` of the
//! fairlane crate): an HTTP client (reqwest), gRPC (tonic), a database pool
//! (sqlx), a WebSocket client (tokio-tungstenite), tower-http's timeouts on
//! an axum application and tokio-util's task tracker; and, without the
//! bridge, the error that says how to get it.
//!
//! Every test calls the crate from a fairlane task and checks that it is
//! one, so that none can pass on a tokio runtime alone.
//!
//! Run with `cargo test -p fairlane-ecosystem --features heavy`.
#![cfg(feature = "heavy")]

mod common;

mod reqwest;
mod sqlx;
mod tokio_util;
mod tonic;
mod tower_http;
mod tungstenite;
mod without_bridge;
