//! The processor a task runs on, and restricting it to some.

use std::sync::Arc;

use fairlane_core::{AffinityError, Host};

use super::ProcessorId;
use crate::runtime::context;

/// The processor the calling task runs on, or `None` outside a task.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let id = rt.block_on(rt.spawn(async { fairlane::task::current_processor() })).unwrap();
/// assert_eq!(id, Some(rt.handle().cluster().processors()[0]));
/// assert_eq!(fairlane::task::current_processor(), None);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn current_processor() -> Option<ProcessorId> {
    context::with_current(|handle| {
        let p = handle.cluster.host().current_processor()?;
        handle.cluster.processor_id(p)
    })
    .flatten()
}

/// Restricts the calling task to the processors `allowed` of its cluster
/// (see [`Builder::affinity`](crate::task::Builder::affinity)), or lifts the restriction with `None`. Takes
/// effect from the next time the task is scheduled: yield right after to
/// move at once.
///
/// # Errors
/// `InvalidInput` for a set naming no processor of the task's cluster or a
/// task with a priority other than normal; `Unsupported` outside a task.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let last = *rt.handle().cluster().processors().last().unwrap();
/// let on = rt.block_on(rt.spawn(async move {
///     fairlane::task::set_affinity(Some([last]))?;
///     fairlane::yield_now().await;
///     Ok::<_, std::io::Error>(fairlane::task::current_processor())
/// })).unwrap()?;
/// assert_eq!(on, Some(last));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_affinity(allowed: Option<impl IntoIterator<Item = ProcessorId>>) -> std::io::Result<()> {
    let allowed: Option<Arc<[ProcessorId]>> = allowed.map(|a| a.into_iter().collect());
    let result = context::with_current(|handle| handle.cluster.set_current_affinity(allowed));
    match result {
        Some(Ok(())) => Ok(()),
        Some(Err(AffinityError::NotInTask)) | None => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            AffinityError::NotInTask.to_string(),
        )),
        Some(Err(e)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            e.to_string(),
        )),
    }
}
