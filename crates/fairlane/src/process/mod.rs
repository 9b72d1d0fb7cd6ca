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

mod pipe;
mod reaper;

use std::ffi::OsStr;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::pin::Pin;
use std::process::{ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::io::reactor::Direction;
use crate::io::unix::readiness::PollFd;
use crate::{Handle, JoinHandle};

use self::pipe::Pipe;
pub use self::pipe::{ChildStderr, ChildStdin, ChildStdout};

/// A process to spawn, as tokio's `Command`: std's
/// [`std::process::Command`] inside, whose builder methods it mirrors, and
/// [`spawn`](Self::spawn), [`status`](Self::status) and
/// [`output`](Self::output) that wait without blocking a processor.
/// Other std options (`CommandExt`'s `pre_exec`, `groups`) are on
/// [`as_std_mut`](Self::as_std_mut).
///
/// # Example
/// ```
/// use fairlane::process::Command;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let status = Command::new("sh").args(["-c", "exit 3"]).status().await?;
/// assert_eq!(status.code(), Some(3));
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
    /// Whether stdin, stdout, stderr were set through this `Command`:
    /// [`output`](Self::output) leaves those alone.
    stdio_set: [bool; 3],
}

impl Command {
    /// A command that runs `program` (looked up in `PATH` if it has no
    /// `/`), with no arguments, this program's environment and working
    /// directory, and (for `spawn` and `status`) its standard streams.
    ///
    /// # Example
    /// ```
    /// let cmd = fairlane::process::Command::new("ls");
    /// assert_eq!(cmd.as_std().get_program(), "ls");
    /// ```
    pub fn new<S: AsRef<OsStr>>(program: S) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// std's command inside.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("ls");
    /// cmd.arg("-l");
    /// assert_eq!(cmd.as_std().get_args().collect::<Vec<_>>(), ["-l"]);
    /// ```
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// std's command inside, mutably: for what this type does not mirror
    /// (`std::os::unix::process::CommandExt::pre_exec`, `groups`). Standard
    /// streams set here are not seen by [`output`](Self::output), which
    /// pipes stdout and stderr and gives a null stdin unless they were set
    /// through [`stdin`](Self::stdin), [`stdout`](Self::stdout) and
    /// [`stderr`](Self::stderr).
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("ls");
    /// cmd.as_std_mut().arg("/");
    /// assert_eq!(cmd.as_std().get_args().count(), 1);
    /// ```
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// std's command, giving up this one (the `kill_on_drop` setting has
    /// no std counterpart and is dropped).
    ///
    /// # Example
    /// ```
    /// let std_cmd: std::process::Command = fairlane::process::Command::new("ls").into_std();
    /// assert_eq!(std_cmd.get_program(), "ls");
    /// ```
    pub fn into_std(self) -> std::process::Command {
        self.std
    }

    /// Adds an argument.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("echo");
    /// cmd.arg("one").arg("two");
    /// assert_eq!(cmd.as_std().get_args().count(), 2);
    /// ```
    pub fn arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("echo");
    /// cmd.args(["one", "two"]);
    /// assert_eq!(cmd.as_std().get_args().count(), 2);
    /// ```
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets environment variable `key` to `val` for the child.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("sh")
    ///     .args(["-c", "echo $GREETING"])
    ///     .env("GREETING", "hi")
    ///     .output()
    ///     .await?;
    /// assert_eq!(out.stdout, b"hi\n");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn env<K, V>(&mut self, key: K, val: V) -> &mut Command
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.env(key, val);
        self
    }

    /// Sets several environment variables.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("env");
    /// cmd.envs([("A", "1"), ("B", "2")]);
    /// assert_eq!(cmd.as_std().get_envs().count(), 2);
    /// ```
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes environment variable `key` from the child's environment.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("env");
    /// cmd.env_remove("HOME");
    /// assert_eq!(cmd.as_std().get_envs().next(), Some((std::ffi::OsStr::new("HOME"), None)));
    /// ```
    pub fn env_remove<K: AsRef<OsStr>>(&mut self, key: K) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Starts the child with an empty environment (then `env` adds to it).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("/usr/bin/env").env_clear().output().await?;
    /// assert!(out.stdout.is_empty());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("pwd").current_dir("/").output().await?;
    /// assert_eq!(out.stdout, b"/\n");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn current_dir<P: AsRef<Path>>(&mut self, dir: P) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's standard input: `Stdio::piped()` (then
    /// [`Child::stdin`] is the writing end), `null()`, `inherit()`, or a
    /// descriptor (a file, another child's pipe).
    ///
    /// # Example
    /// ```
    /// use std::process::Stdio;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("cat").stdin(Stdio::piped()).spawn()?;
    /// assert!(child.stdin.is_some());
    /// child.wait().await?; // closes stdin first, so cat ends
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdin<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdin(cfg);
        self.stdio_set[0] = true;
        self
    }

    /// The child's standard output (as [`stdin`](Self::stdin); piped, it
    /// is [`Child::stdout`]).
    ///
    /// # Example
    /// ```
    /// use std::process::Stdio;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("echo")
    ///     .arg("quiet")
    ///     .stdout(Stdio::null())
    ///     .output()
    ///     .await?;
    /// assert!(out.stdout.is_empty());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdout<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdout(cfg);
        self.stdio_set[1] = true;
        self
    }

    /// The child's standard error (as [`stdin`](Self::stdin); piped, it is
    /// [`Child::stderr`]).
    ///
    /// # Example
    /// ```
    /// use std::process::Stdio;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let child = fairlane::process::Command::new("true").stderr(Stdio::piped()).spawn()?;
    /// assert!(child.stderr.is_some());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stderr<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stderr(cfg);
        self.stdio_set[2] = true;
        self
    }

    /// Whether dropping the [`Child`] (or the future of
    /// [`status`](Self::status) or [`output`](Self::output)) before the
    /// process was reaped kills it (`SIGKILL`). Off by default, as with
    /// tokio: a dropped child runs on, and is reaped when it exits (see the
    /// [module documentation](self)).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let child = fairlane::process::Command::new("sleep").arg("60").kill_on_drop(true).spawn()?;
    /// drop(child); // killed, and reaped by the reaper thread
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Command {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// Whether [`kill_on_drop`](Self::kill_on_drop) is set.
    ///
    /// # Example
    /// ```
    /// let mut cmd = fairlane::process::Command::new("ls");
    /// assert!(!cmd.get_kill_on_drop());
    /// assert!(cmd.kill_on_drop(true).get_kill_on_drop());
    /// ```
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
    }

    /// Runs the child as user `id` (`setuid`).
    ///
    /// # Example
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// let me = std::fs::metadata("/proc/self")?.uid(); // this process's user
    /// let mut cmd = fairlane::process::Command::new("id");
    /// cmd.uid(me);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn uid(&mut self, id: u32) -> &mut Command {
        self.std.uid(id);
        self
    }

    /// Runs the child in group `id` (`setgid`).
    ///
    /// # Example
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// let mine = std::fs::metadata("/proc/self")?.gid(); // this process's group
    /// let mut cmd = fairlane::process::Command::new("id");
    /// cmd.gid(mine);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn gid(&mut self, id: u32) -> &mut Command {
        self.std.gid(id);
        self
    }

    /// The child's `argv[0]` (by default the program as given).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("sh")
    ///     .arg0("renamed")
    ///     .args(["-c", "echo $0"])
    ///     .output()
    ///     .await?;
    /// assert_eq!(out.stdout, b"renamed\n");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn arg0<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.std.arg0(arg);
        self
    }

    /// Puts the child in process group `pgroup` (0: a new group whose id
    /// is the child's pid), as `setpgid`.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let status = fairlane::process::Command::new("true").process_group(0).status().await?;
    /// assert!(status.success());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn process_group(&mut self, pgroup: i32) -> &mut Command {
        self.std.process_group(pgroup);
        self
    }

    /// Starts the process. Its standard streams are inherited unless set;
    /// piped ones are the [`Child`]'s `stdin`, `stdout`, `stderr`.
    ///
    /// # Errors
    /// Outside a fairlane runtime (checked before anything starts); the
    /// program does not exist (`NotFound`) or may not be run
    /// (`PermissionDenied`), and std's other spawn errors; the pipes could
    /// not be watched (the child is then killed and reaped).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut child = fairlane::process::Command::new("true").spawn()?;
    /// assert!(child.id().is_some());
    /// assert!(child.wait().await?.success());
    /// let err = fairlane::process::Command::new("/no/such/program").spawn().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn(&mut self) -> io::Result<Child> {
        let handle = Handle::try_current().map_err(|_| {
            io::Error::other(
                "fairlane::process::Command::spawn must be called inside a fairlane runtime \
                 (a task or Runtime::block_on)",
            )
        })?;
        let mut std = self.std.spawn()?;
        let pid = std.id();
        let driver = handle.io_driver().clone();
        let pipes = (|| {
            let wrap = |fd: Option<OwnedFd>| fd.map(|fd| Pipe::new(driver.clone(), fd)).transpose();
            let stdin = wrap(std.stdin.take().map(OwnedFd::from))?;
            let stdout = wrap(std.stdout.take().map(OwnedFd::from))?;
            let stderr = wrap(std.stderr.take().map(OwnedFd::from))?;
            let pidfd = match pidfd_open(pid) {
                Ok(fd) => Some(PollFd::with_driver(driver.clone(), fd)?),
                Err(e) => {
                    tracing::debug!(
                        pid,
                        "no pidfd ({e}): waiting for the child on the blocking pool"
                    );
                    None
                }
            };
            Ok::<_, io::Error>((stdin, stdout, stderr, pidfd))
        })();
        let (stdin, stdout, stderr, pidfd) = match pipes {
            Ok(parts) => parts,
            Err(e) => {
                // Nobody could wait for it: kill it, and let the reaper
                // reap it.
                let _ = std.kill();
                reaper::adopt(pid, pidfd_open(pid).ok());
                return Err(e);
            }
        };
        Ok(Child {
            stdin: stdin.map(ChildStdin::from_pipe),
            stdout: stdout.map(ChildStdout::from_pipe),
            stderr: stderr.map(ChildStderr::from_pipe),
            inner: ChildInner {
                std,
                pidfd,
                blocking_wait: None,
                handle,
                status: None,
                kill_on_drop: self.kill_on_drop,
            },
        })
    }

    /// Spawns the process (at once, when called) and returns the future of
    /// its exit status, as tokio's: piped streams are closed first, so a
    /// child waiting for input ends. Dropping the future drops the
    /// [`Child`] (see [`kill_on_drop`](Self::kill_on_drop)).
    ///
    /// # Errors
    /// Those of [`spawn`](Self::spawn), and of [`Child::wait`].
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// assert!(fairlane::process::Command::new("true").status().await?.success());
    /// assert_eq!(fairlane::process::Command::new("false").status().await?.code(), Some(1));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + 'static {
        let child = self.spawn();
        async move {
            let mut child = child?;
            drop(child.stdin.take());
            drop(child.stdout.take());
            drop(child.stderr.take());
            child.wait().await
        }
    }

    /// Spawns the process (at once, when called) and returns the future of
    /// its exit status and everything it wrote, as std's and tokio's
    /// `output`: stdout and stderr are piped and stdin is null, unless set
    /// through this `Command` (settings made through
    /// [`as_std_mut`](Self::as_std_mut) are not seen); the command is left
    /// as it was. Dropping the future drops the [`Child`] (see
    /// [`kill_on_drop`](Self::kill_on_drop)).
    ///
    /// # Errors
    /// Those of [`spawn`](Self::spawn), reading the pipes, and
    /// [`Child::wait`].
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let out = fairlane::process::Command::new("sh")
    ///     .args(["-c", "echo out; echo err >&2; exit 2"])
    ///     .output()
    ///     .await?;
    /// assert_eq!((out.status.code(), &out.stdout[..], &out.stderr[..]), (Some(2), &b"out\n"[..], &b"err\n"[..]));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn output(&mut self) -> impl Future<Output = io::Result<Output>> + Send + 'static {
        let [stdin_set, stdout_set, stderr_set] = self.stdio_set;
        if !stdin_set {
            self.std.stdin(Stdio::null());
        }
        if !stdout_set {
            self.std.stdout(Stdio::piped());
        }
        if !stderr_set {
            self.std.stderr(Stdio::piped());
        }
        let child = self.spawn();
        // Back to the defaults of `spawn` (inherited) where they were unset.
        for (set, which) in self.stdio_set.into_iter().zip(0..) {
            if !set {
                match which {
                    0 => self.std.stdin(Stdio::inherit()),
                    1 => self.std.stdout(Stdio::inherit()),
                    _ => self.std.stderr(Stdio::inherit()),
                };
            }
        }
        async move { child?.wait_with_output().await }
    }
}

impl From<std::process::Command> for Command {
    /// Takes std's command as it is (its standard streams count as unset
    /// for [`output`](Command::output)), with `kill_on_drop` off.
    ///
    /// # Example
    /// ```
    /// let mut std_cmd = std::process::Command::new("echo");
    /// std_cmd.arg("x");
    /// let cmd = fairlane::process::Command::from(std_cmd);
    /// assert_eq!(cmd.as_std().get_args().count(), 1);
    /// ```
    fn from(std: std::process::Command) -> Command {
        Command {
            std,
            kill_on_drop: false,
            stdio_set: [false; 3],
        }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("std", &self.std)
            .field("kill_on_drop", &self.kill_on_drop)
            .finish()
    }
}

/// Set once `pidfd_open` returned `ENOSYS`: the kernel has none, so later
/// spawns do not ask again. `Relaxed`: a stale `false` only costs one more
/// failing system call.
static NO_PIDFD: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
thread_local! {
    /// Tests: spawns on this thread act as if `pidfd_open` were missing.
    static FORCE_NO_PIDFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A pidfd for child `pid` (not yet reaped, so the pid is still its).
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
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
fn wait_for_exit_blocking(pid: u32) -> io::Result<()> {
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
/// (unless [`Command::kill_on_drop`]); a reaper thread reaps it once it
/// exits (see the [module documentation](self)).
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
    inner: ChildInner,
}

/// The process side of a [`Child`]: it reaps the process or hands it to
/// the reaper when dropped.
struct ChildInner {
    std: std::process::Child,
    /// Readiness of the child's pidfd; `None` without one (then exits are
    /// waited for on the blocking pool).
    pidfd: Option<PollFd>,
    /// Without a pidfd: the blocking-pool job waiting for the exit (kept
    /// across polls and dropped waits, so one job serves them all).
    blocking_wait: Option<JoinHandle<io::Result<()>>>,
    handle: Handle,
    /// Set once reaped.
    status: Option<ExitStatus>,
    kill_on_drop: bool,
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
    /// then dropped (see [`Command::kill_on_drop`]).
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
    use futures_lite::io::AsyncWriteExt;

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
