//! Clusters as users see them: naming, spawning onto, resizing, and moving
//! a task between them; and the set of processor threads of a runtime.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Instant;

use fairlane_core::{AffinityError, Host, ProcessorId, RemoveError};

use super::{context, wait_until, ExecutorRef, Handle, RuntimeFlavor, RuntimeShared};
use crate::task::JoinHandle;

/// The executor of one of a runtime's clusters, and the cluster's name.
pub(crate) struct NamedExecutor {
    pub(crate) name: Arc<str>,
    pub(crate) cluster: ExecutorRef,
}

impl RuntimeShared {
    pub(crate) fn cluster_named(self: &Arc<Self>, name: &str) -> Option<Cluster> {
        let index = self.clusters.iter().position(|c| &*c.name == name)?;
        Some(Cluster::new(self.clone(), index))
    }

    pub(crate) fn clusters(self: &Arc<Self>) -> Vec<Cluster> {
        (0..self.clusters.len())
            .map(|i| Cluster::new(self.clone(), i))
            .collect()
    }
}

/// The processor threads of a runtime, of every cluster: started when the
/// runtime is built and when a processor is added; each leaves when its
/// processor is removed or the runtime shuts down.
#[derive(Default)]
pub(crate) struct ProcessorThreads {
    state: Mutex<ThreadState>,
    /// Signalled whenever a thread leaves.
    left: Condvar,
}

#[derive(Default)]
struct ThreadState {
    /// Threads started and not yet left.
    running: usize,
    handles: Vec<thread::JoinHandle<()>>,
}

impl RuntimeShared {
    /// Starts a processor thread running `body`, named (with a prefix) by
    /// `named`; see [`ThreadSpec::spawn`](super::threads::ThreadSpec::spawn).
    pub(crate) fn spawn_processor_thread(
        self: &Arc<Self>,
        handle: &Handle,
        named: impl FnOnce(&str) -> String,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        // Counted before the thread starts, so that a shutdown waiting for
        // `running` to reach 0 waits for it too.
        self.threads.lock().running += 1;
        /// Counts the thread out however it ends — also when it never
        /// starts: the OS refused it and the closure is dropped unrun.
        struct Leave(Arc<RuntimeShared>);
        impl Drop for Leave {
            fn drop(&mut self) {
                self.0.threads.leave();
            }
        }
        let leave = Leave(self.clone());
        let handle = self.thread_spec.spawn(handle, named, move || {
            body();
            // Dropped after the stop hook.
            leave
        })?;
        self.threads.lock().handles.push(handle);
        Ok(())
    }
}

impl ProcessorThreads {
    fn leave(&self) {
        self.lock().running -= 1;
        self.left.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ThreadState> {
        // Poisoning: the counters stay consistent whatever panicked.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every processor thread has left (or `deadline` passes)
    /// and joins those that left; the others are detached.
    pub(crate) fn join_all(&self, deadline: Option<Instant>) {
        let state = self.lock();
        let (mut state, all_left) = wait_until(&self.left, state, deadline, |s| s.running == 0);
        let handles = std::mem::take(&mut state.handles);
        drop(state);
        if all_left {
            for handle in handles {
                // A processor thread never unwinds: task panics are caught.
                let _ = handle.join();
            }
        }
    }
}

/// One cluster of a runtime: a set of processors with a ready queue of its
/// own. Tasks run only on their cluster's processors; a task moves to
/// another cluster with [`migrate_here`](Self::migrate_here). Processors can
/// be added and removed while tasks run.
///
/// Cheap to clone; get one from [`Runtime::cluster`](crate::Runtime::cluster)
/// or [`Handle::cluster`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).cluster("batch", 1).build()?;
/// let batch = rt.cluster("batch").unwrap();
/// let sum = batch.spawn(async { (1..=10).sum::<u32>() });
/// assert_eq!(rt.block_on(sum).unwrap(), 55);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Cluster {
    handle: Handle,
    name: Arc<str>,
}

impl Cluster {
    pub(crate) fn new(shared: Arc<RuntimeShared>, index: usize) -> Cluster {
        let name = shared.clusters[index].name.clone();
        Cluster {
            handle: Handle::for_cluster(shared, index),
            name,
        }
    }

    /// The cluster's name (`"default"` for the default cluster).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// assert_eq!(rt.handle().cluster().name(), "default");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle whose spawns (and `block_on`s' spawns) go to this cluster.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("io", 1).build()?;
    /// let io = rt.cluster("io").unwrap();
    /// let on = io.handle().block_on(async { fairlane::Handle::current().cluster().name().to_owned() });
    /// assert_eq!(on, "io");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawns a task on this cluster's processors.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("io", 1).build()?;
    /// let task = rt.cluster("io").unwrap().spawn(async {
    ///     fairlane::Handle::current().cluster().name().to_owned()
    /// });
    /// assert_eq!(rt.block_on(task).unwrap(), "io");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// The identities of the cluster's processors now, in slot order.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// assert_eq!(rt.handle().cluster().processors().len(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn processors(&self) -> Vec<ProcessorId> {
        self.handle.cluster.processor_ids()
    }

    /// Adds a processor (and its thread) to the cluster while tasks run.
    /// Fails with `InvalidInput` when the cluster already has
    /// [`Builder::max_processors`](crate::Builder::max_processors)
    /// processors (a removed processor's slot is free again once its thread
    /// has left), or with the OS error if the thread cannot be started; with
    /// `Unsupported` on a current-thread runtime.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).max_processors(2).build()?;
    /// let cluster = rt.handle().cluster();
    /// let id = cluster.add_processor()?;
    /// assert!(cluster.processors().contains(&id));
    /// assert!(cluster.add_processor().is_err()); // both slots in use
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn add_processor(&self) -> io::Result<ProcessorId> {
        self.refuse_on_current_thread("add_processor")?;
        let core = &self.handle.cluster;
        let Some(id) = core.add_processor() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cluster \"{}\" has no free processor slot ({} in use, or the runtime is \
                     shutting down): raise Builder::max_processors",
                    self.name,
                    core.capacity()
                ),
            ));
        };
        self.handle.cluster.host().io().prepare(id.index());
        if let Err(e) = self.handle.start_processor_thread(id.index()) {
            // Undo: the slot is freed once "its thread" has run, which it
            // does at once, as the processor no longer exists.
            let _ = core.remove_processor(id);
            core.run_processor(id.index());
            return Err(e);
        }
        Ok(id)
    }

    /// Removes processor `id` while tasks run: it finishes the poll it is
    /// in and its thread leaves; the tasks queued on it move to the other
    /// processors, keeping their age. A task restricted to a set of
    /// processors goes to another processor of its set, or, when none is
    /// left, loses its restriction and runs anywhere in the cluster. Its
    /// timers and I/O move too: an operation waiting on its engine carries
    /// on on another one (only a `connect` under way fails, with
    /// `ECANCELED`).
    ///
    /// Blocks until every processor of the cluster has finished the poll it
    /// is in (a resize takes the cluster's processor set for itself for a
    /// moment), so from a task, prefer calling it inside
    /// [`spawn_blocking`](crate::task::spawn_blocking). Fails with
    /// `InvalidInput` for a processor that is not the cluster's (any more)
    /// and for the cluster's last processor; with `Unsupported` on a
    /// current-thread runtime.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// let cluster = rt.handle().cluster();
    /// let ids = cluster.processors();
    /// cluster.remove_processor(ids[1])?;
    /// assert_eq!(cluster.processors(), [ids[0]]);
    /// assert!(cluster.remove_processor(ids[0]).is_err()); // the last one
    /// assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn remove_processor(&self, id: ProcessorId) -> io::Result<()> {
        self.refuse_on_current_thread("remove_processor")?;
        self.handle.cluster.remove_processor(id).map_err(|e| {
            let what = match e {
                RemoveError::NoSuchProcessor => {
                    format!("{id} is not a processor of cluster \"{}\"", self.name)
                }
                _ => format!("cluster \"{}\": {e}", self.name),
            };
            io::Error::new(io::ErrorKind::InvalidInput, what)
        })
    }

    /// A current-thread runtime's one processor is the thread in
    /// `block_on`: it is neither added to nor removed.
    fn refuse_on_current_thread(&self, what: &str) -> io::Result<()> {
        if self.handle.shared.flavor == RuntimeFlavor::CurrentThread {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "Cluster::{what}: a current_thread runtime has exactly one processor, the \
                     thread in block_on (use Builder::new_multi_thread to resize)"
                ),
            ));
        }
        Ok(())
    }

    /// Moves the calling task to this cluster: once the returned future has
    /// completed, the task runs on this cluster's processors (and
    /// `fairlane::spawn` spawns here). Its affinity set, if any, is cleared
    /// (it named the old cluster's processors). Already here: completes at
    /// once. Outside a task of this runtime (in `block_on`, say) the future
    /// completes with an `Unsupported` error.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("cpu", 1).build()?;
    /// let cpu = rt.cluster("cpu").unwrap();
    /// let task = rt.spawn(async move {
    ///     cpu.migrate_here().await?;
    ///     Ok::<_, std::io::Error>(fairlane::Handle::current().cluster().name().to_owned())
    /// });
    /// assert_eq!(rt.block_on(task).unwrap()?, "cpu");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn migrate_here(&self) -> MigrateHere {
        MigrateHere {
            target: self.clone(),
            requested: false,
        }
    }
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("processors", &self.handle.cluster.processors())
            .finish()
    }
}

/// The future of [`Cluster::migrate_here`]: ready once the calling task
/// runs on the target cluster (or with the error that it cannot move).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).cluster("io", 1).build()?;
/// let io = rt.cluster("io").unwrap();
/// let task = rt.spawn(async move {
///     let moving: fairlane::MigrateHere = io.migrate_here();
///     moving.await?;
///     Ok::<_, std::io::Error>(fairlane::Handle::current().cluster().name().to_owned())
/// });
/// assert_eq!(rt.block_on(task).unwrap()?, "io");
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct MigrateHere {
    target: Cluster,
    /// The move was made and the task woken to be scheduled there.
    requested: bool,
}

impl Future for MigrateHere {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let target = &self.target.handle.cluster;
        if target.host().current_processor().is_some() {
            return Poll::Ready(Ok(()));
        }
        if self.requested {
            // Woken early by something else before reaching the target: the
            // move still holds (the task is queued there); wait for it.
            return Poll::Pending;
        }
        let here = context::with_current(|h| h.clone()).filter(|h| {
            h.same_runtime(&self.target.handle) && h.cluster.host().current_processor().is_some()
        });
        let Some(here) = here else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "migrate_here moves a task of this runtime: await it inside a task, not in \
                 block_on or on another runtime",
            )));
        };
        match here.cluster.migrate_current(target) {
            Ok(()) => {
                self.requested = true;
                // Scheduled once this poll ends — onto the target cluster.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Err(AffinityError::NotInTask) | Err(_) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "migrate_here must be awaited directly by a task (not inside block_on)",
            ))),
        }
    }
}
