//! The item store: shards of a hash map, each under its own lock and with
//! its own least-recently-used list, so that connections on different
//! processors touching different keys do not wait for each other.
//!
//! Time is whole seconds of Unix time from a [`Clock`], so that tests can
//! move it by hand. Expiry follows memcached: an exptime of 0 never
//! expires, up to 30 days is relative to now, beyond that an absolute Unix
//! time, and a negative one has expired already.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use slab::Slab;

/// The largest exptime taken as relative to now (30 days), as memcached.
pub const MAX_RELATIVE_EXPTIME: i64 = 60 * 60 * 24 * 30;

/// Bytes counted for an item besides its key and value (memcached's item
/// header is about this size), for the memory limit.
pub const ITEM_OVERHEAD: usize = 48;

/// Where the store reads the time: Unix seconds.
pub trait Clock: Send + Sync {
    /// The time now, in whole seconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A clock moved by hand, for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock that reads `now` until it is moved.
    pub fn new(now: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(now)))
    }

    /// Moves the clock `seconds` ahead.
    pub fn advance(&self, seconds: u64) {
        // Relaxed: the clock is a lone value; readers need no other memory
        // ordered with it.
        self.0.fetch_add(seconds, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The store's limits.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Memory for items (keys, values and [`ITEM_OVERHEAD`] each); past it
    /// the least recently used items are evicted.
    pub memory_limit: usize,
    /// The largest value accepted, in bytes.
    pub item_size_max: usize,
    /// How many shards (rounded up to a power of two).
    pub shards: usize,
}

impl Default for Config {
    /// memcached's defaults: 64 MiB, items up to 1 MiB; 64 shards.
    fn default() -> Config {
        Config {
            memory_limit: 64 << 20,
            item_size_max: 1 << 20,
            shards: 64,
        }
    }
}

/// An item as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The value's bytes.
    pub value: Vec<u8>,
    /// The client's opaque flags.
    pub flags: u32,
    /// When it expires, in Unix seconds; 0 for never.
    pub expires: u64,
    /// Its compare-and-swap version, unique across the store.
    pub cas: u64,
}

impl Item {
    fn expired(&self, now: u64) -> bool {
        self.expires != 0 && self.expires <= now
    }
}

/// How a storage command treats what is stored under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Store whatever is there.
    Set,
    /// Store only if nothing is there.
    Add,
    /// Store only if something is there.
    Replace,
    /// Add the bytes after the value there (keeping its flags and expiry).
    Append,
    /// Add the bytes before the value there.
    Prepend,
    /// Store only if the item there has this cas version.
    Cas(u64),
}

/// What a storage command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// `STORED`.
    Stored,
    /// `NOT_STORED`: the mode's condition did not hold.
    NotStored,
    /// `EXISTS`: a cas whose version is not the item's.
    Exists,
    /// `NOT_FOUND`: a cas on a key with no item.
    NotFound,
    /// The item does not fit in its shard's share of the memory even
    /// alone.
    OutOfMemory,
}

/// What an increment or decrement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The new value.
    Value(u64),
    /// No item under the key.
    NotFound,
    /// The value is not a decimal number of at most 64 bits.
    NotANumber,
}

/// Counters for `stats`, summed over the shards.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Items stored now (some perhaps expired, not yet noticed).
    pub curr_items: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Bytes counted against the memory limit.
    pub bytes: u64,
    /// Keys looked up by get and gets.
    pub cmd_get: u64,
    /// Keys found by them.
    pub get_hits: u64,
    /// Storage commands.
    pub cmd_set: u64,
    /// Items evicted for memory.
    pub evictions: u64,
    /// Items found expired.
    pub expired: u64,
}

/// No neighbour in the LRU list.
const NIL: usize = usize::MAX;

struct Node {
    key: Box<[u8]>,
    item: Item,
    /// Towards the most recently used.
    prev: usize,
    /// Towards the least recently used.
    next: usize,
}

struct Shard {
    index: HashMap<Box<[u8]>, usize>,
    nodes: Slab<Node>,
    /// The most recently used.
    head: usize,
    /// The least recently used, evicted first.
    tail: usize,
    bytes: usize,
    limit: usize,
    /// The next cas version's count: versions are `count * stride + id`,
    /// so that no two shards hand out the same one.
    next_cas: u64,
    id: u64,
    stride: u64,
    stats: Stats,
}

fn size(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + ITEM_OVERHEAD
}

impl Shard {
    fn new(limit: usize, id: usize, stride: usize) -> Shard {
        Shard {
            id: id as u64,
            stride: stride as u64,
            index: HashMap::new(),
            nodes: Slab::new(),
            head: NIL,
            tail: NIL,
            bytes: 0,
            limit,
            next_cas: 1,
            stats: Stats::default(),
        }
    }

    fn version(&mut self) -> u64 {
        let v = self.next_cas * self.stride + self.id;
        self.next_cas += 1;
        v
    }

    fn unlink(&mut self, at: usize) {
        let (prev, next) = (self.nodes[at].prev, self.nodes[at].next);
        match prev {
            NIL => self.head = next,
            p => self.nodes[p].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n].prev = prev,
        }
    }

    fn push_front(&mut self, at: usize) {
        self.nodes[at].prev = NIL;
        self.nodes[at].next = self.head;
        match self.head {
            NIL => self.tail = at,
            h => self.nodes[h].prev = at,
        }
        self.head = at;
    }

    fn remove(&mut self, at: usize) -> Node {
        self.unlink(at);
        let node = self.nodes.remove(at);
        self.index.remove(&node.key);
        self.bytes -= size(&node.key, &node.item.value);
        node
    }

    /// The live item under `key`, made the most recently used; an expired
    /// one is removed on the way.
    fn find(&mut self, key: &[u8], now: u64) -> Option<usize> {
        let at = *self.index.get(key)?;
        if self.nodes[at].item.expired(now) {
            self.remove(at);
            self.stats.expired += 1;
            return None;
        }
        if self.head != at {
            self.unlink(at);
            self.push_front(at);
        }
        Some(at)
    }

    /// Stores `item` under `key` (replacing the node at `existing`),
    /// evicting the least recently used items to make room.
    fn put(&mut self, key: &[u8], mut item: Item, existing: Option<usize>) -> Stored {
        let needed = size(key, &item.value);
        if needed > self.limit {
            return Stored::OutOfMemory;
        }
        let key: Box<[u8]> = match existing {
            Some(at) => self.remove(at).key,
            None => key.into(),
        };
        while self.bytes + needed > self.limit && self.tail != NIL {
            self.remove(self.tail);
            self.stats.evictions += 1;
        }
        item.cas = self.version();
        let at = self.nodes.insert(Node {
            key: key.clone(),
            item,
            prev: NIL,
            next: NIL,
        });
        self.push_front(at);
        self.index.insert(key, at);
        self.bytes += needed;
        self.stats.total_items += 1;
        Stored::Stored
    }

    fn clear(&mut self) {
        self.index.clear();
        self.nodes.clear();
        self.head = NIL;
        self.tail = NIL;
        self.bytes = 0;
    }
}

/// The items, in shards.
///
/// # Example
/// ```
/// use fairlane_memcached::store::{Config, ManualClock, Mode, Store, Stored};
///
/// let clock = ManualClock::new(1_700_000_000);
/// let store = Store::new(Config::default(), clock.clone());
/// assert_eq!(store.store(Mode::Set, b"k", 7, 10, b"value"), Stored::Stored);
/// assert_eq!(store.get(b"k", |item| (item.flags, item.value.clone())), Some((7, b"value".to_vec())));
/// clock.advance(10);
/// assert_eq!(store.get(b"k", |_| ()), None, "expired after its 10 s");
/// ```
pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
    item_size_max: usize,
    /// A delayed `flush_all`: when it takes effect (Unix seconds), or 0.
    flush_at: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("shards", &self.shards.len())
            .field("item_size_max", &self.item_size_max)
            .finish_non_exhaustive()
    }
}

/// A shard's lock, taken even if a thread panicked holding it (each
/// operation leaves the shard consistent before it can panic).
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// A store with `config`'s limits, reading time from `clock`.
    pub fn new(config: Config, clock: Arc<dyn Clock>) -> Store {
        let shards = config.shards.max(1).next_power_of_two();
        let per_shard = config.memory_limit / shards;
        Store {
            shards: (0..shards)
                .map(|i| Mutex::new(Shard::new(per_shard, i, shards)))
                .collect(),
            hasher: RandomState::new(),
            clock,
            item_size_max: config.item_size_max,
            flush_at: AtomicU64::new(0),
        }
    }

    /// The largest value accepted.
    pub fn item_size_max(&self) -> usize {
        self.item_size_max
    }

    /// The memory limit (summed over the shards).
    pub fn memory_limit(&self) -> usize {
        self.shards.len() * lock(&self.shards[0]).limit
    }

    /// The time now; first carries out a delayed flush that is due (before
    /// any shard is locked, since it locks them all).
    pub fn now(&self) -> u64 {
        let now = self.clock.now();
        // Relaxed: the flush time is a lone value, and the shards' locks
        // order the clearing with every access to the items.
        let at = self.flush_at.load(Ordering::Relaxed);
        if at != 0
            && at <= now
            && self
                .flush_at
                .compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.clear();
        }
        now
    }

    /// memcached's reading of an exptime: the Unix second it expires at,
    /// or 0 for never.
    pub fn expiry(exptime: i64, now: u64) -> u64 {
        match exptime {
            // Long gone (and not 0, which means never).
            e if e < 0 => 1,
            0 => 0,
            e if e <= MAX_RELATIVE_EXPTIME => now + e as u64,
            e => e as u64,
        }
    }

    fn shard_of(&self, key: &[u8]) -> &Mutex<Shard> {
        &self.shards[self.hasher.hash_one(key) as usize & (self.shards.len() - 1)]
    }

    /// Calls `found` with the live item under `key`, if any.
    pub fn get<R>(&self, key: &[u8], found: impl FnOnce(&Item) -> R) -> Option<R> {
        let now = self.now();
        let shard = self.shard_of(key);
        let mut shard = lock(shard);
        shard.stats.cmd_get += 1;
        let at = shard.find(key, now)?;
        shard.stats.get_hits += 1;
        Some(found(&shard.nodes[at].item))
    }

    /// A storage command: `value` under `key` as `mode` says.
    pub fn store(&self, mode: Mode, key: &[u8], flags: u32, exptime: i64, value: &[u8]) -> Stored {
        let now = self.now();
        let shard = self.shard_of(key);
        let mut shard = lock(shard);
        shard.stats.cmd_set += 1;
        let existing = shard.find(key, now);
        let item = |value: Vec<u8>| Item {
            value,
            flags,
            expires: Store::expiry(exptime, now),
            cas: 0,
        };
        let new = match (mode, existing) {
            (Mode::Add, Some(_)) | (Mode::Replace | Mode::Append | Mode::Prepend, None) => {
                return Stored::NotStored
            }
            (Mode::Cas(_), None) => return Stored::NotFound,
            (Mode::Cas(cas), Some(at)) if shard.nodes[at].item.cas != cas => return Stored::Exists,
            (Mode::Append | Mode::Prepend, Some(at)) => {
                let old = &shard.nodes[at].item;
                let mut joined = Vec::with_capacity(old.value.len() + value.len());
                if mode == Mode::Append {
                    joined.extend_from_slice(&old.value);
                    joined.extend_from_slice(value);
                } else {
                    joined.extend_from_slice(value);
                    joined.extend_from_slice(&old.value);
                }
                if joined.len() > self.item_size_max {
                    return Stored::NotStored;
                }
                Item {
                    value: joined,
                    ..old.clone_header()
                }
            }
            _ => item(value.to_vec()),
        };
        shard.put(key, new, existing)
    }

    /// Removes the item under `key`; whether there was a live one.
    pub fn delete(&self, key: &[u8]) -> bool {
        let now = self.now();
        let shard = self.shard_of(key);
        let mut shard = lock(shard);
        match shard.find(key, now) {
            Some(at) => {
                shard.remove(at);
                true
            }
            None => false,
        }
    }

    /// Adds `delta` to the number under `key` (wrapping at 2⁶⁴), or
    /// subtracts it (stopping at 0).
    pub fn count(&self, key: &[u8], delta: u64, increment: bool) -> Counted {
        let now = self.now();
        let shard = self.shard_of(key);
        let mut shard = lock(shard);
        let Some(at) = shard.find(key, now) else {
            return Counted::NotFound;
        };
        // memcached leaves trailing spaces after a decrement that shortened
        // the number; they are accepted here too.
        let number = std::str::from_utf8(&shard.nodes[at].item.value)
            .ok()
            .map(|s| s.trim_end_matches(' '))
            .and_then(|s| s.parse::<u64>().ok());
        let Some(number) = number else {
            return Counted::NotANumber;
        };
        let new = if increment {
            number.wrapping_add(delta)
        } else {
            number.saturating_sub(delta)
        };
        let digits = new.to_string();
        let cas = shard.version();
        let node = &mut shard.nodes[at];
        let old_len = node.item.value.len();
        node.item.value.clear();
        node.item.value.extend_from_slice(digits.as_bytes());
        node.item.cas = cas;
        shard.bytes = shard.bytes - old_len + digits.len();
        Counted::Value(new)
    }

    /// Gives the item under `key` a new exptime; whether there was one.
    pub fn touch(&self, key: &[u8], exptime: i64) -> bool {
        let now = self.now();
        let shard = self.shard_of(key);
        let mut shard = lock(shard);
        match shard.find(key, now) {
            Some(at) => {
                shard.nodes[at].item.expires = Store::expiry(exptime, now);
                true
            }
            None => false,
        }
    }

    /// `flush_all`: removes every item now (`delay` 0), or those stored
    /// before the time the exptime `delay` names.
    pub fn flush(&self, delay: i64) {
        let now = self.now();
        if delay <= 0 {
            self.flush_at.store(0, Ordering::Relaxed);
            self.clear();
        } else {
            self.flush_at
                .store(Store::expiry(delay, now), Ordering::Relaxed);
        }
    }

    fn clear(&self) {
        for shard in self.shards.iter() {
            lock(shard).clear();
        }
    }

    /// Zeroes the counters of [`stats`](Store::stats) that count events.
    pub fn reset_stats(&self) {
        for shard in self.shards.iter() {
            lock(shard).stats = Stats::default();
        }
    }

    /// The counters, summed over the shards.
    pub fn stats(&self) -> Stats {
        let mut sum = Stats::default();
        for shard in self.shards.iter() {
            let shard = lock(shard);
            let s = &shard.stats;
            sum.curr_items += shard.nodes.len() as u64;
            sum.bytes += shard.bytes as u64;
            sum.total_items += s.total_items;
            sum.cmd_get += s.cmd_get;
            sum.get_hits += s.get_hits;
            sum.cmd_set += s.cmd_set;
            sum.evictions += s.evictions;
            sum.expired += s.expired;
        }
        sum
    }
}

impl Item {
    /// The item's flags and expiry with no value (for append/prepend).
    fn clone_header(&self) -> Item {
        Item {
            value: Vec::new(),
            flags: self.flags,
            expires: self.expires,
            cas: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, ManualClock, Mode, Store, Stored, ITEM_OVERHEAD};

    #[test]
    fn the_least_recently_used_items_are_evicted_first() {
        // One shard of room for three items of 52 bytes.
        let store = Store::new(
            Config {
                memory_limit: 3 * (ITEM_OVERHEAD + 4),
                item_size_max: 1024,
                shards: 1,
            },
            ManualClock::new(1_700_000_000),
        );
        for key in ["a", "b", "c"] {
            assert_eq!(
                store.store(Mode::Set, key.as_bytes(), 0, 0, b"123"),
                Stored::Stored
            );
        }
        // Using "a" makes "b" the least recently used.
        assert!(store.get(b"a", |_| ()).is_some());
        store.store(Mode::Set, b"d", 0, 0, b"123");
        assert!(store.get(b"b", |_| ()).is_none());
        for key in ["a", "c", "d"] {
            assert!(store.get(key.as_bytes(), |_| ()).is_some(), "{key}");
        }
        let stats = store.stats();
        assert_eq!((stats.evictions, stats.curr_items), (1, 3));
        assert_eq!(stats.bytes, 3 * (ITEM_OVERHEAD as u64 + 4));
        // An item bigger than the shard's room is refused, nothing evicted.
        let big = vec![0; 200];
        assert_eq!(
            store.store(Mode::Set, b"e", 0, 0, &big),
            Stored::OutOfMemory
        );
        assert_eq!(store.stats().curr_items, 3);
    }

    #[test]
    fn counting_keeps_the_byte_count() {
        let store = Store::new(Config::default(), ManualClock::new(1_700_000_000));
        store.store(Mode::Set, b"n", 0, 0, b"9");
        store.count(b"n", 991, true);
        assert_eq!(store.stats().bytes, (ITEM_OVERHEAD + 1 + 4) as u64);
        store.delete(b"n");
        assert_eq!(store.stats().bytes, 0);
    }
}
