//! Options for spawning a task.

use std::future::Future;
use std::sync::Arc;

use super::{JoinHandle, ProcessorId};

/// Options for spawning a task, as tokio's `task::Builder`.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.block_on(async {
///     fairlane::task::Builder::new().background().spawn(async { 3 })
/// })?;
/// assert_eq!(rt.block_on(handle).unwrap(), 3);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a task::Builder does nothing until `spawn` is called"]
pub struct Builder {
    options: fairlane_core::SpawnOptions,
    name: Option<Arc<str>>,
}

/// A task's priority class, chosen with [`Builder::priority`].
///
/// # Example
/// ```
/// use fairlane::task::{Builder, Priority};
/// assert_eq!(Priority::default(), Priority::Normal);
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let low = Builder::new().priority(Priority::Low).spawn_on(async { "ran" }, rt.handle())?;
/// assert_eq!(rt.block_on(low).unwrap(), "ran");
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::Priority;

impl Builder {
    /// A builder for an ordinary task.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new().spawn_on(async { 5 }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), 5);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the task a background task: it never keeps the runtime alive.
    /// [`Runtime::shutdown_graceful`](crate::Runtime::shutdown_graceful) does
    /// not wait for it; it raises [`shutdown_requested`](crate::task::shutdown_requested) for it once the other
    /// tasks have finished, and cancels it after the grace period.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     fairlane::task::Builder::new().background().spawn(async {
    ///         loop {
    ///             fairlane::yield_now().await; // housekeeping, forever
    ///         }
    ///     })
    /// })?;
    /// rt.shutdown_graceful(std::time::Duration::from_millis(10));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn background(mut self) -> Self {
        self.options.background = true;
        self
    }

    /// The task's priority class (default [`Priority::Normal`]). A priority
    /// shifts *when* a task runs, never *whether*: a ready normal or low task
    /// at the head of its lane waits at most
    /// [`Builder::priority_bound`](crate::Builder::priority_bound) polls of
    /// other classes' tasks on its processor (default 8), and processors help
    /// each other by age whatever the class. Yielding never raises a task's
    /// standing.
    ///
    /// # Example
    /// ```
    /// use fairlane::task::{Builder, Priority};
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let urgent = Builder::new().priority(Priority::High).spawn_on(async { "first" }, rt.handle())?;
    /// assert_eq!(rt.block_on(urgent).unwrap(), "first");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn priority(mut self, priority: Priority) -> Self {
        self.options.priority = priority;
        self
    }

    /// Restricts the task to the processors `allowed` of its cluster: it is
    /// only ever polled on one of them (helping and stealing processors
    /// outside the set never take it; it waits in a lane of its own so it
    /// never holds up the tasks behind it). A task woken on an allowed
    /// processor stays there; otherwise it goes to the processor that last
    /// ran it if allowed, else to the first allowed one. If every allowed
    /// processor is removed, the task loses its restriction and runs
    /// anywhere in its cluster. Restricted tasks run at normal priority.
    ///
    /// # Errors
    /// At spawn: a set naming no processor of the cluster, or a priority
    /// other than normal, is an `InvalidInput` error.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// let first = rt.handle().cluster().processors()[0];
    /// let task = fairlane::task::Builder::new()
    ///     .affinity([first])
    ///     .spawn_on(async { fairlane::task::current_processor() }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), Some(first));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn affinity(mut self, allowed: impl IntoIterator<Item = ProcessorId>) -> Self {
        self.options.affinity = Some(allowed.into_iter().collect());
        self
    }

    /// Names the task; the name appears in its [`JoinError`](crate::JoinError)s and in its
    /// [`JoinHandle`]'s `Debug` output.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new()
    ///     .name("flusher")
    ///     .spawn_on(async { panic!("disk gone") }, rt.handle())?;
    /// let err = rt.block_on(task).unwrap_err();
    /// assert_eq!(err.to_string(), r#"task "flusher" panicked with message "disk gone""#);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Spawns `future` on the current runtime with these options.
    ///
    /// # Errors
    /// Outside a runtime (use [`spawn_on`](Self::spawn_on) there).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::task::Builder::new().spawn(async {}).is_err());
    /// ```
    pub fn spawn<F>(self, future: F) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = crate::Handle::try_current()
            .map_err(|e| std::io::Error::other(format!("task::Builder::spawn: {e}")))?;
        self.spawn_on(future, &handle)
    }

    /// Spawns `future` (which need not be `Send`) onto the current
    /// [`LocalSet`](crate::task::LocalSet), named.
    ///
    /// # Errors
    /// Outside a `LocalSet`; and with a priority or an affinity, which a
    /// local task cannot have (it runs inside whatever drives its set), an
    /// `InvalidInput` error.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let err = local.block_on(&rt, async {
    ///     let task = fairlane::task::Builder::new()
    ///         .name("parser")
    ///         .spawn_local(async { panic!("bad input") })?;
    ///     Ok::<_, std::io::Error>(task.await.unwrap_err())
    /// })?;
    /// assert!(err.to_string().contains("parser"));
    /// assert!(fairlane::task::Builder::new().spawn_local(async {}).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_local<F>(self, future: F) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.refuse_local_options("spawn_local")?;
        let mut task = super::local_set::try_spawn_local(future).ok_or_else(|| {
            std::io::Error::other("task::Builder::spawn_local: called outside a task::LocalSet")
        })?;
        task.name = self.name;
        Ok(task)
    }

    /// Spawns `future` (which need not be `Send`) onto `local`, named; it
    /// runs when `local` is driven.
    ///
    /// # Errors
    /// As [`spawn_local`](Self::spawn_local), for a priority or an affinity.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let task = fairlane::task::Builder::new()
    ///     .name("ui")
    ///     .spawn_local_on(async { std::rc::Rc::new(1) }, &local)?;
    /// assert_eq!(*local.block_on(&rt, task).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_local_on<F>(
        self,
        future: F,
        local: &super::LocalSet,
    ) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.refuse_local_options("spawn_local_on")?;
        let mut task = local.spawn_local(future);
        task.name = self.name;
        Ok(task)
    }

    /// A local task has no priority or affinity. (`background` is
    /// accepted: a graceful shutdown waits for whatever drives the set,
    /// never for its tasks.)
    fn refuse_local_options(&self, method: &str) -> std::io::Result<()> {
        let defaults = fairlane_core::SpawnOptions::default();
        if self.options.priority == defaults.priority && self.options.affinity.is_none() {
            return Ok(());
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "task::Builder::{method}: a local task runs inside whatever drives its LocalSet; \
                 it can have neither a priority nor an affinity"
            ),
        ))
    }

    /// Spawns `future` on the runtime of `handle` with these options.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new().spawn_on(async { 1 }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_on<F>(
        self,
        future: F,
        handle: &crate::Handle,
    ) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut task = handle.spawn_with(future, self.options).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("task::Builder: {e}"),
            )
        })?;
        task.name = self.name;
        Ok(task)
    }
}
