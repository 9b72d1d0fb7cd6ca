//! Crates built on tokio run from fairlane tasks through fairlane's tokio
//! bridge (feature `tokio-compat`). The crate has no code of its own: its
//! tests (behind the `heavy` feature, which brings the crates in) are small
//! programs using reqwest, tonic, sqlx, tokio-tungstenite, tower-http and
//! tokio-util from fairlane tasks, and its example `reqwest_bridge`
//! measures what the bridge costs an HTTP client.
//!
//! ```sh
//! cargo test -p fairlane-ecosystem --features heavy
//! cargo run --release -p fairlane-ecosystem --features heavy --example reqwest_bridge
//! ```
