//! [`Child`]: a spawned process, waited for without blocking a processor.

use crate::io::reactor::Direction;
use crate::io::unix::readiness::PollFd;
use crate::{Handle, JoinHandle};
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::process::{ExitStatus, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::pipe::Pipe;
use super::reaper;
use super::{ChildStderr, ChildStdin, ChildStdout};

/// Set once `pidfd_open` returned `ENOSYS`: the kernel has none, so later
/// spawns do not ask again. `Relaxed`: a stale `false` only costs one more
/// failing system call.
pub(super) static NO_PIDFD: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
thread_local! {
    /// Tests: spawns on this thread act as if `pidfd_open` were missing.
    static FORCE_NO_PIDFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A pidfd for child `pid` (not yet reaped, so the pid is still its).
pub(super) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    #[cfg(test)]
    if FORCE_NO_PIDFD.with(|f| f.get()) {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    if NO_PIDFD.load(Ordering::Relaxed) {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    // SAFETY: a system call with integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            NO_PIDFD.store(true, Ordering::Relaxed);
        }
        return Err(e);
    }
    // SAFETY: a new descriptor (close-on-exec, as pidfd_open makes them)
    // that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Blocks until process `pid` (a child of this program) has exited,
/// without reaping it (`WNOWAIT`): the reaping stays with its `Child`.
pub(super) fn wait_for_exit_blocking(pid: u32) -> io::Result<()> {
    loop {
        // SAFETY: all-zero bytes are a valid `siginfo_t`.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: writes one `siginfo_t` into the live local.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A spawned child process, as tokio's `Child`: its piped standard streams
/// (take them out of the fields), and [`wait`](Self::wait) for its exit
/// without blocking a processor.
///
/// Dropping it before the process was reaped does not kill the process
/// (unless [`Command::kill_on_drop`](crate::process::Command::kill_on_drop)); a reaper thread reaps it once it
/// exits (see the [module documentation](crate::process)).
///
/// # Example
/// ```
/// use fairlane::process::Command;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let mut child = Command::new("sleep").arg("60").spawn()?;
/// assert_eq!(child.try_wait()?, None);
/// child.kill().await?;
/// assert!(child.id().is_none(), "reaped");
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Child {
    /// The writing end of the child's standard input, if it was piped.
    pub stdin: Option<ChildStdin>,
    /// The reading end of the child's standard output, if it was piped.
    pub stdout: Option<ChildStdout>,
    /// The reading end of the child's standard error, if it was piped.
    pub stderr: Option<ChildStderr>,
    pub(super) inner: ChildInner,
}

/// The process side of a [`Child`]: it reaps the process or hands it to
/// the reaper when dropped.
pub(super) struct ChildInner {
    pub(super) std: std::process::Child,
    /// Readiness of the child's pidfd; `None` without one (then exits are
    /// waited for on the blocking pool).
    pub(super) pidfd: Option<PollFd>,
    /// Without a pidfd: the blocking-pool job waiting for the exit (kept
    /// across polls and dropped waits, so one job serves them all).
    pub(super) blocking_wait: Option<JoinHandle<io::Result<()>>>,
    pub(super) handle: Handle,
    /// Set once reaped.
    pub(super) status: Option<ExitStatus>,
    pub(super) kill_on_drop: bool,
}

impl ChildInner {
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.std.try_wait()?;
        }
        Ok(self.status)
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        if let Some(status) = self.status {
            return Poll::Ready(Ok(status));
        }
        self.follow_current_runtime();
        let std = &mut self.std;
        let status = if let Some(pidfd) = &mut self.pidfd {
            // Readable once the process exited; reaping never blocks then.
            std::task::ready!(pidfd.poll_io(cx, Direction::Read, |_| {
                std.try_wait()?
                    .ok_or_else(|| io::ErrorKind::WouldBlock.into())
            }))?
        } else {
            loop {
                if let Some(status) = std.try_wait()? {
                    break status;
                }
                let pid = std.id();
                let job = self.blocking_wait.get_or_insert_with(|| {
                    self.handle
                        .spawn_blocking(move || wait_for_exit_blocking(pid))
                });
                let exited = std::task::ready!(Pin::new(job).poll(cx));
                self.blocking_wait = None;
                exited.map_err(io::Error::other)??;
            }
        };
        self.status = Some(status);
        Poll::Ready(Ok(status))
    }
}

impl ChildInner {
    /// A child may be waited for in another runtime than the one that
    /// spawned it, which may be gone by then (as tokio's may): when the
    /// caller runs in another runtime, the pidfd moves to that runtime's
    /// I/O driver and blocking-pool waits to its pool. Outside any runtime
    /// nothing moves.
    fn follow_current_runtime(&mut self) {
        let Ok(current) = Handle::try_current() else {
            return;
        };
        if Arc::ptr_eq(current.io_driver(), self.handle.io_driver()) {
            return;
        }
        if let Some(pidfd) = self.pidfd.take() {
            // Cancels the wait in flight on the old driver first.
            let fd = pidfd.into_fd();
            self.pidfd = PollFd::with_driver(current.io_driver().clone(), fd)
                .inspect_err(|e| {
                    tracing::debug!(
                        pid = self.std.id(),
                        "pidfd not moved to this runtime ({e}): waiting on the blocking pool"
                    );
                })
                .ok();
        }
        // A job on the old pool only waits (it does not reap): dropping
        // its handle detaches it, and the next poll starts one here.
        self.blocking_wait = None;
        self.handle = current;
    }
}

impl Drop for ChildInner {
    fn drop(&mut self) {
        if !matches!(self.try_wait(), Ok(None)) {
            // Reaped (or gone: `ECHILD`).
            return;
        }
        if self.kill_on_drop {
            if let Err(e) = self.std.kill() {
                tracing::debug!(pid = self.std.id(), "kill_on_drop: {e}");
            }
        }
        // Any wait in flight is cancelled and the pidfd leaves the poller
        // before the reaper takes it. A blocking-pool wait runs on until
        // the exit (it does not reap).
        let pidfd = self.pidfd.take().map(PollFd::into_fd);
        reaper::adopt(self.std.id(), pidfd);
    }
}

impl Child {
    /// The process id, until the process was reaped (then `None`, as
    /// tokio's: the id may belong to another process by then).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("true").spawn()?;
    /// assert!(child.id().is_some());
    /// child.wait().await?;
    /// assert_eq!(child.id(), None);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Option<u32> {
        self.inner.status.is_none().then(|| self.inner.std.id())
    }

    /// Waits for the process to exit and reaps it; its exit status. Closes
    /// [`stdin`](Self::stdin) first (as tokio's), so that a child reading
    /// its input to the end can finish. The processor is not blocked: the
    /// exit is waited for through the child's pidfd (or, without one, on
    /// the blocking pool). After the first success it returns the same
    /// status at once.
    ///
    /// # Cancellation
    /// Cancel-safe: dropping the future loses nothing; wait again later.
    ///
    /// # Errors
    /// The runtime shut down; `waitpid` failed (`ECHILD` if something else
    /// in the program reaped the child).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("sh").args(["-c", "exit 7"]).spawn()?;
    /// assert_eq!(child.wait().await?.code(), Some(7));
    /// assert_eq!(child.wait().await?.code(), Some(7));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        poll_fn(|cx| self.inner.poll_wait(cx)).await
    }

    /// The exit status if the process has exited (reaping it), else `None`,
    /// without waiting.
    ///
    /// # Errors
    /// `waitpid` failed.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("sleep").arg("60").spawn()?;
    /// assert!(child.try_wait()?.is_none());
    /// child.kill().await?;
    /// assert!(child.try_wait()?.is_some());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.inner.try_wait()
    }

    /// Sends the process `SIGKILL` without waiting (then
    /// [`wait`](Self::wait) reaps it). A process already reaped is not
    /// signalled (its id may have been reused) and `Ok` is returned, as
    /// std's `kill` does (tokio returns an error there).
    ///
    /// # Errors
    /// `kill` failed.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("sleep").arg("60").spawn()?;
    /// child.start_kill()?;
    /// use std::os::unix::process::ExitStatusExt;
    /// assert_eq!(child.wait().await?.signal(), Some(libc::SIGKILL));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_kill(&mut self) -> io::Result<()> {
        if self.inner.status.is_some() {
            return Ok(());
        }
        self.inner.std.kill()
    }

    /// Kills the process (`SIGKILL`) and waits until it is reaped.
    ///
    /// # Errors
    /// Those of [`start_kill`](Self::start_kill) and [`wait`](Self::wait).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("sleep").arg("60").spawn()?;
    /// child.kill().await?;
    /// assert!(!child.wait().await?.success());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait().await.map(drop)
    }

    /// Closes stdin, reads stdout and stderr (those piped) to their end at
    /// the same time, and waits for the exit: the status and everything
    /// the child wrote.
    ///
    /// # Errors
    /// Reading a pipe failed, or [`wait`](Self::wait) did. The child is
    /// then dropped (see [`Command::kill_on_drop`](crate::process::Command::kill_on_drop)).
    ///
    /// # Example
    /// ```
    /// use std::process::Stdio;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let child = fairlane::process::Command::new("echo")
    ///     .arg("all of it")
    ///     .stdout(Stdio::piped())
    ///     .spawn()?;
    /// let out = child.wait_with_output().await?;
    /// assert_eq!(out.stdout, b"all of it\n");
    /// assert!(out.stderr.is_empty(), "not piped");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn wait_with_output(self) -> io::Result<Output> {
        let Child {
            stdin,
            stdout,
            stderr,
            mut inner,
        } = self;
        drop(stdin);
        let mut stdout = stdout.map(ChildStdout::into_pipe);
        let mut stderr = stderr.map(ChildStderr::into_pipe);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        poll_fn(|cx| {
            let out_done = read_to_end(&mut stdout, &mut out, cx)?;
            let err_done = read_to_end(&mut stderr, &mut err, cx)?;
            if out_done.is_ready() && err_done.is_ready() {
                Poll::Ready(Ok::<(), io::Error>(()))
            } else {
                Poll::Pending
            }
        })
        .await?;
        let status = poll_fn(|cx| inner.poll_wait(cx)).await?;
        Ok(Output {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

/// Reads `pipe` (if any is left) to its end into `buf`; `None` once done.
fn read_to_end(
    pipe: &mut Option<Pipe>,
    buf: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    if let Some(p) = pipe {
        std::task::ready!(p.poll_read_to_end(cx, buf))?;
        *pipe = None;
    }
    Poll::Ready(Ok(()))
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.inner.std.id())
            .field("status", &self.inner.status)
            .field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoBackend;
    use crate::process::Command;
    use futures_lite::io::AsyncWriteExt;
    use std::process::Stdio;

    /// Whether process `pid` no longer exists (reaped; a zombie still does).
    fn is_gone(pid: u32) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
        r == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }

    async fn until_gone(pid: u32) {
        while !is_gone(pid) {
            crate::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Without a pidfd (as on kernels before 5.3), on both backends: exits
    /// are waited for on the blocking pool while the processor stays free
    /// (the children exit only when another task writes to them), a wait
    /// dropped part way leaves its blocking job for the next wait, and
    /// dropped children (killed by `kill_on_drop`, or ending later) are
    /// reaped by the reaper's periodic look.
    #[test]
    fn exits_are_waited_for_without_a_pidfd() {
        for backend in [IoBackend::IoUring, IoBackend::Fallback] {
            let rt = crate::Runtime::builder()
                .processors(1)
                .io_backend(backend)
                .build()
                .expect("runtime");
            rt.block_on(async {
                FORCE_NO_PIDFD.with(|f| f.set(true));
                let head = || {
                    Command::new("head")
                        .args(["-c", "1"])
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn head")
                };
                let mut inputs = Vec::new();
                let mut waiters = Vec::new();
                for _ in 0..4 {
                    let mut child = head();
                    assert!(child.inner.pidfd.is_none());
                    inputs.push(child.stdin.take().expect("piped"));
                    waiters.push(crate::spawn(async move {
                        // A first wait dropped part way: its job is kept.
                        {
                            let mut wait = std::pin::pin!(child.wait());
                            assert!(futures_lite::future::poll_once(&mut wait).await.is_none());
                        }
                        assert!(child.inner.blocking_wait.is_some());
                        child.wait().await.expect("wait")
                    }));
                }
                crate::spawn(async move {
                    crate::yield_now().await;
                    for mut stdin in inputs {
                        stdin.write_all(b"x").await.expect("write");
                    }
                })
                .await
                .expect("releaser");
                for w in waiters {
                    assert!(w.await.expect("waiter").success());
                }
                // try_wait and kill.
                let mut child = head();
                assert_eq!(child.try_wait().expect("try_wait"), None);
                child.kill().await.expect("kill");
                assert!(child.id().is_none());
                // Dropped: killed, or left running and ending later.
                let mut cmd = Command::new("sleep");
                cmd.arg("600");
                let killed = cmd.kill_on_drop(true).spawn().expect("spawn");
                let killed_pid = killed.id().expect("pid");
                drop(killed);
                let left = cmd.kill_on_drop(false).spawn().expect("spawn");
                let left_pid = left.id().expect("pid");
                drop(left);
                until_gone(killed_pid).await;
                assert!(!is_gone(left_pid), "not killed");
                // SAFETY: a plain system call; `left_pid` is an unreaped child.
                assert_eq!(
                    unsafe { libc::kill(left_pid as libc::pid_t, libc::SIGKILL) },
                    0
                );
                until_gone(left_pid).await;
                FORCE_NO_PIDFD.with(|f| f.set(false));
            });
        }
    }
}
