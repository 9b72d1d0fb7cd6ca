//! Clusters, resizing, affinity and migration: one test binary, one module
//! a topic.
//!
//! - [`resizing`]: processors are added and removed (from a plain thread,
//!   every one or two milliseconds) while tasks run: every wake still leads
//!   to exactly one poll, every task completes exactly once, no ping-pong
//!   chain loses a wake-up, `Cluster::processors` always matches the adds
//!   and removes, and dropping the runtime meanwhile drops every task once.
//! - [`removal`]: removing a processor moves the tasks queued on it (none
//!   runs on it once the removal has returned); tasks that remove their own
//!   processor, each other's, or one whose task is in `block_in_place`.
//! - [`errors`]: the error cases of resizing and of building clusters.
//! - [`affinity`]: a task restricted to a set of processors is only ever
//!   polled on them; one whose processors are all removed is re-homed and
//!   completes.
//! - [`migration`]: tasks of a cluster run on its processor threads;
//!   `migrate_here` moves a task between clusters, back and forth, also
//!   while the target is resized, without losing it.
//! - [`names`]: a named task's name appears in its `JoinError`.
//! - [`io`]: timers and I/O operations waiting on a removed processor's
//!   engine carry on elsewhere, on both backends.
//!
//! The shared helpers (the resizer, where a task runs) are in
//! `tests/common/clusters.rs`. Every scenario that would hang if the
//! runtime lost a task runs under a deadline (a hang guard only: nothing
//! here measures time).

// Waking through a clone (`wake`, which consumes the waker) is a different
// path in the task cell than `wake_by_ref`; the tests use both on purpose.
#![allow(clippy::waker_clone_wake)]

#[path = "../common/mod.rs"]
mod common;

mod affinity;
mod errors;
mod io;
mod migration;
mod names;
mod removal;
mod resizing;
