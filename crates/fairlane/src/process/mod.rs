//! Child processes, as tokio's `process`: [`Command`] builds and spawns
//! one, [`Child`] waits for it without blocking a processor, and
//! [`ChildStdin`], [`ChildStdout`], [`ChildStderr`] are its standard
//! streams as asynchronous pipes (`futures_io::AsyncRead`/`AsyncWrite`,
//! and tokio's traits with the `tokio-io` feature).
//!
//! # How waiting works
//! - Exit: each child gets a pidfd (`pidfd_open`, Linux 5.3), which
//!   becomes readable when the process exits; the runtime waits for that
//!   readiness as it does for a socket's (io_uring: a one-shot `POLL_ADD`;
//!   fallback: the epoll poller), then reaps the process with a
//!   non-blocking `waitpid`. Where `pidfd_open` fails (`ENOSYS` on older
//!   kernels, or a sandbox that forbids it), a wait runs on the blocking
//!   pool instead (`waitid` with `WNOWAIT`, which sees the exit without
//!   reaping it; the reaping stays with the [`Child`]), holding one pool
//!   thread until the child exits, even if the wait is dropped. Dropping a
//!   runtime waits for its running blocking jobs, so there a runtime
//!   dropped while such a wait was under way waits for that child to exit
//!   (unless [`Command::kill_on_drop`] kills it as its task is dropped, or
//!   [`Runtime::shutdown_timeout`](crate::Runtime::shutdown_timeout) bounds
//!   the wait).
//! - Pipes: the parent's ends are made non-blocking and their reads and
//!   writes wait for readiness the same way.
//! - Dropping: a [`Child`] dropped before its process was reaped hands it
//!   to a reaper thread of the program (`fairlane-reaper`, started by the
//!   first such drop), which sleeps in `poll` on the pidfds of the dropped
//!   children and reaps each when it exits, so none stays a zombie; the
//!   process is not killed unless [`Command::kill_on_drop`] asked for it
//!   (then it is sent `SIGKILL` first). The reaper is the program's, not a
//!   runtime's: dropped children are reaped after the runtime is gone too.
//!
//! # Not provided
//! Windows' parts (`creation_flags`, `raw_arg`, handles), tokio's
//! `spawn_with`, and `Command::pre_exec` (use `as_std_mut()` and
//! `std::os::unix::process::CommandExt`; the child then starts as std
//! starts it). A program that reaps every child itself (`waitpid(-1)`, or
//! `SIGCHLD` set to `SIG_IGN`) makes waiting fail with `ECHILD`, as with
//! std.
//!
//! # Example
//! ```
//! use fairlane::process::Command;
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! rt.block_on(async {
//!     let out = Command::new("echo").arg("hello").output().await?;
//!     assert!(out.status.success());
//!     assert_eq!(out.stdout, b"hello\n");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod child;
mod command;
mod pipe;
mod reaper;

pub use self::child::Child;
pub use self::command::Command;
pub use self::pipe::{ChildStderr, ChildStdin, ChildStdout};
