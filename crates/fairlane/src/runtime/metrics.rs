//! The runtime's counters.

/// The counters of one cluster (tokio's name for the type, which there
/// covers the runtime's only cluster): per processor, and its live tasks.
/// A runtime with several clusters has one of these for each, from each
/// cluster's [`Handle::metrics`](crate::Handle::metrics).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let polls: u64 = rt.metrics().processors.iter().map(|p| p.polls).sum();
/// let parked = rt.spawn(std::future::pending::<()>());
/// assert_eq!(rt.metrics().alive_tasks, 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RuntimeMetrics {
    /// One entry per processor.
    pub processors: Vec<ProcessorMetrics>,
    /// Tasks spawned on the cluster whose future has not been dropped yet
    /// (tokio's `num_alive_tasks`). A task that moved to another cluster
    /// ([`Cluster::migrate_here`](crate::Cluster::migrate_here))
    /// still counts where it was spawned.
    pub alive_tasks: usize,
}

/// One processor's entry in [`RuntimeMetrics::processors`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
/// let metrics: fairlane::ProcessorMetrics = rt.metrics().processors[0];
/// assert!(metrics.polls >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::ProcessorCounters as ProcessorMetrics;
