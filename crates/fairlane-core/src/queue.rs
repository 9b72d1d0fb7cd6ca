//! The ready queue: every processor's lanes, the push rule, and the pop
//! paths (own lanes, age-based helping, stealing, the final scan).
//!
//! The protocol, its invariants and why no task is lost are described in
//! `queue.md` beside this file.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::lane::{Lane, LaneInfo, PushOutcome};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::{Config, Priority};

/// Where a popped task came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// One of the processor's own lanes.
    Own,
    /// Another processor's lane that the age rule judged much older.
    Help,
    /// Another processor's lane, taken because this one had no work.
    Steal,
}

/// Per-processor state that only the owning processor writes. Relaxed
/// loads and stores (never read-modify-writes) keep it as cheap as plain
/// fields while letting other threads read the counters.
pub(crate) struct Local {
    push_cursor: AtomicUsize,
    pops: AtomicUsize,
    rng: AtomicU64,
    /// Lane index chosen as the next help target, or `NO_TARGET`.
    help_target: AtomicUsize,
    /// The clock as read at the top of the current scheduling iteration;
    /// pushes made by this processor stamp their tasks with it.
    pub(crate) now: AtomicU64,
    /// Own-lane pops of other classes since the head of the normal lanes
    /// (resp. the low lane) became ready: the priority bound's counters.
    normal_waited: AtomicUsize,
    low_waited: AtomicUsize,
    pub(crate) counters: Counters,
    /// Set by another thread to make the thread running this processor
    /// return from `run_processor` (the hand-back of `block_in_place`).
    pub(crate) released: AtomicBool,
}

/// Counters each processor keeps about itself.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) iterations: AtomicU64,
    pub(crate) polls: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) helps: AtomicU64,
    pub(crate) steals: AtomicU64,
}

/// Adds one to an owner-written counter without a read-modify-write, and
/// returns the new value.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) -> u64 {
    let value = counter.load(Ordering::Relaxed).wrapping_add(1);
    counter.store(value, Ordering::Relaxed);
    value
}

const NO_TARGET: usize = usize::MAX;

impl Local {
    fn new(seed: u64) -> Self {
        Self {
            push_cursor: AtomicUsize::new(0),
            pops: AtomicUsize::new(0),
            rng: AtomicU64::new(seed | 1),
            help_target: AtomicUsize::new(NO_TARGET),
            now: AtomicU64::new(0),
            normal_waited: AtomicUsize::new(0),
            low_waited: AtomicUsize::new(0),
            counters: Counters::default(),
            released: AtomicBool::new(false),
        }
    }

    /// xorshift64*: the owner's private random numbers.
    #[inline]
    fn random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Post-increments an owner-only cursor.
    #[inline]
    fn next(cursor: &AtomicUsize) -> usize {
        let c = cursor.load(Ordering::Relaxed);
        cursor.store(c.wrapping_add(1), Ordering::Relaxed);
        c
    }
}

/// The cluster's ready queue: per processor, `lanes_per_processor` lanes of
/// normal-priority tasks, then one lane of high- and one of low-priority
/// tasks (`stride` lanes in all).
pub(crate) struct ReadyQueue<T> {
    lanes: Box<[CachePadded<Lane<T>>]>,
    info: Box<[CachePadded<LaneInfo>]>,
    pub(crate) local: Box<[CachePadded<Local>]>,
    lanes_per_processor: usize,
    /// Lanes per processor: `lanes_per_processor` + 2.
    stride: usize,
    /// See `Config::priority_bound`.
    priority_bound: usize,
    help_period: usize,
    help_factor_log2: u32,
    steal_attempts: usize,
    /// Set once, at shutdown; checked under a lane's lock by every push.
    closed: CachePadded<AtomicBool>,
    /// Spreads pushes from outside threads that have no preferred processor.
    outside: CachePadded<AtomicUsize>,
    /// Per processor, the other processors sharing its last-level cache (as
    /// the host reports it): preferred help targets.
    near: Box<[Box<[usize]>]>,
}

impl<T> ReadyQueue<T> {
    /// `cache_domain(p)` names processor `p`'s last-level cache.
    pub(crate) fn new(config: &Config, cache_domain: impl Fn(usize) -> usize) -> Self {
        let stride = config.lanes_per_processor + 2;
        let n = config.processors * stride;
        let domains: Vec<usize> = (0..config.processors).map(cache_domain).collect();
        let near = (0..config.processors)
            .map(|p| {
                (0..config.processors)
                    .filter(|&q| q != p && domains[q] == domains[p])
                    .collect()
            })
            .collect();
        Self {
            lanes: (0..n).map(|_| CachePadded::new(Lane::new())).collect(),
            info: (0..n).map(|_| CachePadded::new(LaneInfo::new())).collect(),
            local: (0..config.processors)
                .map(|p| {
                    CachePadded::new(Local::new(
                        0x9e37_79b9_7f4a_7c15u64.wrapping_mul(p as u64 + 1),
                    ))
                })
                .collect(),
            lanes_per_processor: config.lanes_per_processor,
            stride,
            priority_bound: config.priority_bound as usize,
            help_period: config.help_period as usize,
            help_factor_log2: config.help_factor_log2,
            steal_attempts: config.steal_attempts,
            closed: CachePadded::new(AtomicBool::new(false)),
            outside: CachePadded::new(AtomicUsize::new(0)),
            near,
        }
    }

    pub(crate) fn processors(&self) -> usize {
        self.local.len()
    }

    fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// Pushes on behalf of processor `p` onto its own lanes, alternating
    /// between them, try-locking and moving on when one is busy; if all are
    /// busy it waits for the one whose turn it was. Stamped with the
    /// processor's iteration clock. Gives the item back once the queue is
    /// closed.
    #[inline]
    pub(crate) fn push_local(&self, p: usize, item: T, priority: Priority) -> Result<(), T> {
        let local = &self.local[p];
        let ts = local.now.load(Ordering::Relaxed);
        if priority == Priority::Normal {
            let start = Local::next(&local.push_cursor);
            self.push_to(p, 0..self.lanes_per_processor, start, item, ts)
        } else {
            self.push_to(p, self.class_lanes(priority), 0, item, ts)
        }
    }

    /// Offsets, within a processor's lanes, of the lanes of `priority`.
    #[inline]
    fn class_lanes(&self, priority: Priority) -> core::ops::Range<usize> {
        let normal = self.lanes_per_processor;
        match priority {
            Priority::High => normal..normal + 1,
            Priority::Normal => 0..normal,
            Priority::Low => normal + 1..normal + 2,
        }
    }

    /// Pushes from a thread that is not one of this queue's processors: to a
    /// lane of `preferred` (the processor that last ran the task), else to a
    /// processor chosen round-robin.
    pub(crate) fn push_remote(
        &self,
        preferred: Option<usize>,
        item: T,
        now: u64,
        priority: Priority,
    ) -> Result<(), T> {
        let p = match preferred {
            Some(p) if p < self.processors() => p,
            _ => self.outside.fetch_add(1, Ordering::Relaxed) % self.processors(),
        };
        // The timestamp's low bits are as good a lane choice as any.
        self.push_to(
            p,
            self.class_lanes(priority),
            (now >> 4) as usize,
            item,
            now,
        )
    }

    /// Pushes onto one of processor `p`'s lanes at `offsets`, starting with
    /// the `start`-th (modulo their number).
    #[inline]
    fn push_to(
        &self,
        p: usize,
        offsets: core::ops::Range<usize>,
        start: usize,
        mut item: T,
        ts: u64,
    ) -> Result<(), T> {
        let count = offsets.len();
        let base = p * self.stride + offsets.start;
        let open = || !self.closed.load(Ordering::Relaxed);
        for i in 0..=count {
            let l = base + (start + i) % count;
            // The last round waits for the lock of the lane whose turn it was.
            match self.lanes[l].push(&self.info[l], item, ts, i == count, open) {
                PushOutcome::Pushed => return Ok(()),
                PushOutcome::Busy(back) => item = back,
                PushOutcome::Closed(back) => return Err(back),
            }
        }
        unreachable!("the last round of push_to waits for its lane")
    }

    /// The fast path: a pending help target much older than our own lanes,
    /// else our own lanes, oldest head first. Every `help_period` pops a new help
    /// target is drawn for the next pop.
    #[inline]
    pub(crate) fn pop(&self, p: usize, now: u64) -> Option<(T, Source)> {
        let local = &self.local[p];

        if self.help_period != 0 && self.processors() > 1 {
            let target = local.help_target.load(Ordering::Relaxed);
            if target != NO_TARGET {
                local.help_target.store(NO_TARGET, Ordering::Relaxed);
                if self.much_older(target, p, now) {
                    if let Some(item) = self.lanes[target].pop(&self.info[target], now, false) {
                        return Some((item, Source::Help));
                    }
                }
            }
            if Local::next(&local.pops) % self.help_period == 0 {
                let target = self.random_help_target(p);
                local.help_target.store(target, Ordering::Relaxed);
                // The target is checked on the next pop: start fetching its
                // side-array line now, so the check does not wait for it.
                prefetch(&*self.info[target]);
            }
        }

        self.pop_own(p, now).map(|item| (item, Source::Own))
    }

    /// Own lanes. Classes: high before normal before low, except that a
    /// class whose head has waited `priority_bound` pops of other classes is
    /// served first (the bound of `Config::priority_bound`). Without high
    /// or low tasks this is just the normal lanes, at the cost of two loads.
    #[inline]
    fn pop_own(&self, p: usize, now: u64) -> Option<T> {
        let local = &self.local[p];
        let base = p * self.stride;
        let high = base + self.lanes_per_processor;
        let low = high + 1;
        let high_ready = self.info[high].looks_nonempty();
        let low_ready = self.info[low].looks_nonempty();
        if !high_ready && !low_ready {
            Self::reset(&local.low_waited);
            if let Some(item) = self.pop_normal(p, now) {
                Self::reset(&local.normal_waited);
                return Some(item);
            }
            return None;
        }
        let normal_ready = (base..high).any(|l| self.info[l].looks_nonempty());
        let bound = self.priority_bound;
        let order = if low_ready && local.low_waited.load(Ordering::Relaxed) >= bound {
            [Priority::Low, Priority::High, Priority::Normal]
        } else if normal_ready && local.normal_waited.load(Ordering::Relaxed) >= bound {
            [Priority::Normal, Priority::High, Priority::Low]
        } else {
            [Priority::High, Priority::Normal, Priority::Low]
        };
        for class in order {
            let item = match class {
                Priority::High => self.lanes[high].pop(&self.info[high], now, false),
                Priority::Normal => self.pop_normal(p, now),
                Priority::Low => self.lanes[low].pop(&self.info[low], now, false),
            };
            if let Some(item) = item {
                // Count this pop against each class left waiting; a class
                // served (or empty) starts over.
                let count = |waited: &AtomicUsize, ready: bool, waiting_class: Priority| {
                    if !ready || class == waiting_class {
                        Self::reset(waited);
                    } else {
                        waited.store(waited.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                };
                count(&local.normal_waited, normal_ready, Priority::Normal);
                count(&local.low_waited, low_ready, Priority::Low);
                return Some(item);
            }
        }
        None
    }

    /// Zeroes an owner-only counter, writing only if it is not zero already.
    #[inline]
    fn reset(counter: &AtomicUsize) {
        if counter.load(Ordering::Relaxed) != 0 {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// The normal lanes, oldest head first: pushes alternate between lanes,
    /// and serving the older head keeps the processor's lanes together a
    /// FIFO, so a task that yields in a loop waits behind every task that was
    /// ready before it, whichever lane it landed in. (Plain round-robin
    /// service would let a short lane's tasks run more often.)
    #[inline]
    fn pop_normal(&self, p: usize, now: u64) -> Option<T> {
        let base = p * self.stride;
        let lanes = base..base + self.lanes_per_processor;
        let mut skip = usize::MAX;
        for _ in lanes.clone() {
            let mut best = usize::MAX;
            let mut best_head = crate::lane::EMPTY;
            for l in lanes.clone() {
                let head = self.info[l].head();
                if l != skip && head < best_head {
                    best = l;
                    best_head = head;
                }
            }
            if best == usize::MAX {
                return None;
            }
            if let Some(item) = self.lanes[best].pop(&self.info[best], now, false) {
                return Some(item);
            }
            // Busy (a helper holds it) or just emptied: try the next oldest.
            skip = best;
        }
        None
    }

    /// The age rule: `age(target) > age(own) × 2^factor`, where our own age
    /// is that of our oldest lane.
    #[inline]
    fn much_older(&self, target: usize, p: usize, now: u64) -> bool {
        let theirs = self.info[target].age(now);
        if theirs == 0 {
            return false;
        }
        let own = (p * self.stride..(p + 1) * self.stride)
            .map(|l| self.info[l].age(now))
            .max()
            .unwrap_or(0);
        // `theirs / 2^factor > own`, which cannot overflow.
        theirs >> self.help_factor_log2 > own
    }

    /// A random lane of another processor, one sharing our last-level cache
    /// 15 times in 16 when there is one (the rest keeps every lane of the
    /// cluster within reach of help).
    fn random_help_target(&self, p: usize) -> usize {
        let near = &self.near[p];
        let r = self.local[p].random();
        if near.is_empty() || r & 15 == 0 || near.len() + 1 == self.processors() {
            return self.random_foreign_lane(p);
        }
        let other = near[(r >> 4) as usize % near.len()];
        other * self.stride + self.random_lane_offset(r >> 40)
    }

    /// A random lane of another processor (see `random_lane_offset`).
    fn random_foreign_lane(&self, p: usize) -> usize {
        let n = self.processors();
        let r = self.local[p].random();
        let other = (p + 1 + (r as usize) % (n - 1)) % n;
        other * self.stride + self.random_lane_offset(r >> 32)
    }

    /// A lane offset within a processor: its high or low lane one time in 16
    /// each, a normal lane otherwise. Most programs use no priorities, and a
    /// draw that lands on an empty class lane is a wasted help check; the
    /// class lanes are still drawn often enough that a processor stuck in a
    /// task that never yields has them helped too (and steals, by processors
    /// with no work, scan every lane).
    #[inline]
    fn random_lane_offset(&self, r: u64) -> usize {
        let normal = self.lanes_per_processor;
        match r & 15 {
            0 => normal,
            1 => normal + 1,
            _ => ((r >> 4) as usize) % normal,
        }
    }

    /// The slow path: a few random single-lane try-pops on other processors,
    /// then one pass over every lane from a random offset.
    pub(crate) fn steal(&self, p: usize, now: u64) -> Option<(T, Source)> {
        let n = self.lane_count();
        let lpp = self.stride;
        if self.processors() > 1 {
            for _ in 0..self.steal_attempts {
                let l = self.random_foreign_lane(p);
                if self.info[l].looks_nonempty() {
                    if let Some(item) = self.lanes[l].pop(&self.info[l], now, false) {
                        return Some((item, Source::Steal));
                    }
                }
            }
        }
        let start = self.local[p].random() as usize;
        for i in 0..n {
            let l = (start + i) % n;
            if self.info[l].looks_nonempty() {
                if let Some(item) = self.lanes[l].pop(&self.info[l], now, false) {
                    let source = if l / lpp == p {
                        Source::Own
                    } else {
                        Source::Steal
                    };
                    return Some((item, source));
                }
            }
        }
        None
    }

    /// The idle protocol's final scan: every lane whose head says non-empty is
    /// locked (waiting, not trying) and popped. Called after `fence(SeqCst)`,
    /// which makes the head reads reliable (see `idle.md`).
    pub(crate) fn final_scan(&self, p: usize, now: u64) -> Option<(T, Source)> {
        let n = self.lane_count();
        let lpp = self.stride;
        for i in 0..n {
            let l = (p * lpp + i) % n;
            if self.info[l].looks_nonempty() {
                if let Some(item) = self.lanes[l].pop(&self.info[l], now, true) {
                    let source = if l / lpp == p {
                        Source::Own
                    } else {
                        Source::Steal
                    };
                    return Some((item, source));
                }
            }
        }
        None
    }

    /// Whether any lane looks non-empty.
    pub(crate) fn any_visible(&self) -> bool {
        self.info.iter().any(|i| i.looks_nonempty())
    }

    /// Closes the queue: later pushes hand their item back.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Empties every lane. After [`close`](Self::close), whatever this
    /// returns is all that will ever have been in the queue: a push that
    /// takes a lane's lock after we did sees `closed` (the lock orders it
    /// after our store) and hands its item back instead.
    pub(crate) fn drain(&self) -> Vec<T> {
        let mut out = Vec::new();
        for (lane, info) in self.lanes.iter().zip(self.info.iter()) {
            out.extend(lane.take_all(info).into_iter().map(|(item, _)| item));
        }
        out
    }
}

/// Hints the CPU to bring `value`'s cache line in; a no-op where there is no
/// such instruction.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: a prefetch has no architectural effect (it cannot fault, even on
    // an invalid address); `value` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            value as *const T as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = value;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn queue(processors: usize, domain: impl Fn(usize) -> usize) -> ReadyQueue<u32> {
        let mut config = Config::new(processors);
        config.lanes_per_processor = 2;
        ReadyQueue::new(&config, domain)
    }

    #[test]
    fn help_targets_prefer_the_shared_cache_but_reach_every_processor() {
        // Processors 0-3 share one cache, 4-7 another.
        let q = queue(8, |p| p / 4);
        let mut near = 0;
        let mut seen = [false; 8];
        for _ in 0..16_000 {
            let target = q.random_help_target(1) / q.stride;
            assert_ne!(target, 1, "a processor never helps itself");
            seen[target] = true;
            near += usize::from(target < 4);
        }
        // 15/16 drawn near, plus the uniform 1/16 landing near 3 times in 7.
        assert!(
            near > 14_500,
            "only {near} of 16000 targets shared the cache"
        );
        assert!(
            seen.iter().enumerate().all(|(p, &s)| s || p == 1),
            "{seen:?}"
        );
    }

    #[test]
    fn one_cache_domain_draws_uniformly() {
        let q = queue(4, |_| 0);
        let mut counts = [0usize; 4];
        for _ in 0..12_000 {
            counts[q.random_help_target(0) / q.stride] += 1;
        }
        assert_eq!(counts[0], 0);
        assert!(counts[1..].iter().all(|&c| c > 3_000), "{counts:?}");
    }

    #[test]
    fn own_lanes_are_served_oldest_head_first() {
        let q = queue(1, |_| 0);
        // Outside pushes choose the lane by the timestamp's bits 4 and up:
        // stamps 1-3 land in lane 0, stamp 16 in lane 1. Oldest first gives
        // push order; round-robin service would give 0, 3, 1, 2.
        for (item, ts) in [(0u32, 1u64), (1, 2), (2, 3), (3, 16)] {
            q.push_remote(Some(0), item, ts, Priority::Normal).unwrap();
        }
        let order: Vec<u32> = (0..4).map(|_| q.pop(0, 100).unwrap().0).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert!(q.pop(0, 100).is_none());
    }

    #[test]
    fn a_closed_queue_hands_pushes_back_and_drains_everything() {
        let q = queue(2, |_| 0);
        q.push_remote(Some(1), 7, 1, Priority::Normal).unwrap();
        q.close();
        assert_eq!(q.push_remote(Some(0), 8, 2, Priority::Normal), Err(8));
        assert_eq!(q.drain(), [7]);
        assert!(!q.any_visible());
    }
}
