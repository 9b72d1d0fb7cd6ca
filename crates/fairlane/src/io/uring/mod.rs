//! The io_uring engine: a processor's ring, its submission and completion
//! paths, and [`Op`], the future of one operation with owned resources.
//!
//! Why this is safe (the full argument is in `driver.md`):
//! - every access to the ring's queues happens under the processor's lock,
//!   which is what the crate's `submission_shared`/`completion_shared`
//!   require;
//! - an operation's resources (buffers, addresses, paths) live in its `Op`
//!   until the completion arrives; a dropped `Op` moves them into the slab
//!   (`OpSlot::Abandoned`), where the completion frees them (after handing
//!   what a socket's read received, or what its write did not send, to the
//!   socket's [`Carry`]);
//! - stopping a processor cancels and reaps every operation before its ring
//!   or anything it points to is freed, and leaks (never frees) what it
//!   could not reap;
//! - after an `io_uring_enter` error that is not ridden out the ring is
//!   *broken*: nobody enters it to submit again, so the entries the kernel
//!   had not consumed (the last ones published, as many as the queue's
//!   length) are never read by it, and their operations are done elsewhere
//!   (`Ring::settle`).
//!
//! Parts: `slot.rs` (an operation's slot in the slab, and what becomes of
//! a dropped operation's resources), `ring.rs` (the ring: submitting,
//! reaping, waiting, breaking and stopping), `op.rs` (the [`Op`] future).

use std::time::Duration;

mod op;
mod ring;
mod slot;

pub(crate) use op::{cancel_kept, Op};
pub(crate) use ring::{Ring, SqLog};
pub(crate) use slot::OpSlot;

/// `user_data` of the read on the wake-up eventfd.
const WAKE: u64 = u64::MAX;
/// `user_data` of cancellation requests (their completions are ignored).
const CANCEL: u64 = u64::MAX - 1;
/// Entries of each ring's submission queue.
const ENTRIES: u32 = 256;
/// The result recorded for an operation the kernel cancelled without its
/// future asking (its engine stopped, or the thread that submitted it
/// exited): its `Op` submits it again on a live engine (`complete`).
const RESTART: i32 = i32::MIN;
/// The result recorded for an operation whose entry the kernel never
/// consumed, on a ring that broke (`Ring::settle`): its `Op` submits it
/// again on another engine, even one that must not be repeated after a
/// cancellation ([`Op::once`]), since the kernel never saw it.
const UNSUBMITTED: i32 = i32::MIN + 1;
/// How many times a submission is retried after `EINTR`, `EBUSY` or
/// `EAGAIN` before the error breaks the ring (each retry after `EBUSY` or
/// `EAGAIN` reaps completions first).
const SUBMIT_RETRIES: u32 = 64;
/// How long stopping a processor waits for cancelled operations.
const STOP_PATIENCE: Duration = Duration::from_secs(5);
/// How long a synchronous cancellation of a broken ring's operations may
/// wait for requests the kernel is running (`Ring::evacuate`).
const SYNC_CANCEL_PATIENCE: Duration = Duration::from_millis(50);
