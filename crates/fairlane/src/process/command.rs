//! [`Command`]: builds a child process and spawns it.

use crate::io::unix::readiness::PollFd;
use crate::Handle;
use std::ffi::OsStr;
use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};

use super::child::{pidfd_open, Child, ChildInner};
use super::pipe::Pipe;
use super::reaper;
use super::{ChildStderr, ChildStdin, ChildStdout};

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
    /// [module documentation](crate::process)).
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
