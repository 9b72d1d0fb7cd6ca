//! A memcached server on fairlane: memcached's text protocol over a
//! sharded store with memcached's expiry, item size limit and LRU eviction
//! under a memory limit that bounds what clients can make it hold. The
//! crate's README lists what still differs from memcached.
//!
//! - [`store`]: the items, in shards each under its own lock, under one
//!   memory account; time from a [`store::Clock`] that tests move by hand.
//! - [`protocol`]: the text protocol as bytes in, bytes out, testable
//!   without sockets.
//! - [`server`]: connections on fairlane, what each may hold, and the
//!   graceful shutdown on SIGINT/SIGTERM.
//!
//! ```text
//! cargo run --release -p fairlane-memcached -- [ADDRESS] [PROCESSORS] [-m MEGABYTES] [-I SIZE] [-c CONNECTIONS] [-b BACKLOG]
//! ```
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use fairlane_memcached::protocol::{Session, Shared};
//! use fairlane_memcached::store::{Config, Store, SystemClock};
//!
//! let shared = Shared::new(Store::new(Config::default(), Arc::new(SystemClock)), 1);
//! let mut session = Session::new();
//! let mut out = Vec::new();
//! let input = b"set k 0 0 2\r\nhi\r\nget k\r\n";
//! let done = session.execute(&shared, input, &mut out);
//! assert_eq!(done.consumed, input.len());
//! assert_eq!(out, b"STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n");
//! ```

#![warn(missing_docs)]

mod number;
pub mod protocol;
pub mod server;
pub mod store;
