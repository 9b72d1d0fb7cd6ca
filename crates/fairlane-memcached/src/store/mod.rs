//! The item store: shards of a hash map, each under its own lock and with
//! its own least-recently-used list, so that connections on different
//! processors touching different keys do not wait for each other, under
//! one memory limit for all of them.
//!
//! **Memory.** Every byte the store holds for its clients is charged to
//! one account (see `memory.rs`): items, values that replies still share
//! after the store let them go, and room reserved for commands still
//! arriving. While the account is over the limit the store evicts, and it
//! evicts across shards in least-recently-used order: every item carries
//! the store's tick of its last use (a counter that each store advances),
//! every shard publishes the tick of its least recently used item, and
//! eviction takes the item whose tick is the oldest of them. That order is
//! the exact LRU order up to the items used between two stores (which
//! share a tick) and to stores racing on other processors; nothing is
//! evicted while the account is under the limit.
//!
//! **Time** is whole seconds of Unix time from a [`Clock`], so that tests
//! can move it by hand. Expiry follows memcached: an exptime of 0 never
//! expires, up to 30 days is relative to now, beyond that an absolute Unix
//! time, and a negative one has expired already.

mod clock;
mod memory;
mod shard;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use self::clock::{Clock, ManualClock, SystemClock};
use self::memory::Account;
pub use self::memory::Reservation;
pub(crate) use self::shard::item_charge;
use self::shard::Shard;

/// The largest exptime taken as relative to now (30 days), as memcached.
pub const MAX_RELATIVE_EXPTIME: i64 = 60 * 60 * 24 * 30;

/// The bytes memcached counts for an item besides its key and value when
/// it applies its item size limit (`-I`): a 48-byte header, an 8-byte cas
/// version, the key's terminating NUL and the value's `\r\n`. Flags other
/// than 0 add 4 more.
pub const ITEM_HEADER: usize = 48 + 8 + 1 + 2;

/// The store's limits.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Memory for items, in bytes (see the [module](self) for what is
    /// counted); past it the least recently used items are evicted.
    pub memory_limit: usize,
    /// The largest item accepted, in bytes, counted as memcached counts it
    /// (see [`Store::item_size`]).
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
    /// The value's bytes, shared with the replies that are sending them.
    pub value: Arc<[u8]>,
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
    /// The item is larger than the whole memory limit (a set removes the
    /// item it would have replaced, as memcached).
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
    /// Bytes charged for the items (with their share of the tables).
    pub bytes: u64,
    /// Keys looked up by get and gets.
    pub cmd_get: u64,
    /// Keys found by them.
    pub get_hits: u64,
    /// Keys looked up by touch, gat and gats.
    pub cmd_touch: u64,
    /// Keys found by them.
    pub touch_hits: u64,
    /// Storage commands.
    pub cmd_set: u64,
    /// Live items evicted for memory.
    pub evictions: u64,
    /// Items found expired.
    pub expired: u64,
    /// Bytes reserved for commands still arriving.
    pub reserved: u64,
    /// Bytes of values the store let go that replies still share.
    pub pinned: u64,
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
/// assert_eq!(store.get(b"k", |item| (item.flags, item.value.to_vec())), Some((7, b"value".to_vec())));
/// clock.advance(10);
/// assert_eq!(store.get(b"k", |_| ()), None, "expired after its 10 s");
/// ```
pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    /// Each shard's least recently used item's tick (`u64::MAX` when the
    /// shard is empty), written under the shard's lock and read without
    /// it to choose whose item to evict. Relaxed: a hint, checked again
    /// under the lock (a stale one only evicts a slightly younger item).
    tails: Box<[AtomicU64]>,
    /// The tick: each store takes the next one; a get stamps its item with
    /// the current one. Relaxed: it orders nothing but the stamps.
    tick: AtomicU64,
    account: Arc<Account>,
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
            .field("memory_limit", &self.account.limit())
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
        Store {
            shards: (0..shards)
                .map(|i| Mutex::new(Shard::new(i, shards)))
                .collect(),
            tails: (0..shards).map(|_| AtomicU64::new(u64::MAX)).collect(),
            tick: AtomicU64::new(0),
            account: Arc::new(Account::new(config.memory_limit)),
            hasher: RandomState::new(),
            clock,
            item_size_max: config.item_size_max,
            flush_at: AtomicU64::new(0),
        }
    }

    /// The largest item accepted (see [`item_size`](Self::item_size)).
    pub fn item_size_max(&self) -> usize {
        self.item_size_max
    }

    /// The size memcached gives an item when it applies `-I`: its key and
    /// value, [`ITEM_HEADER`], and 4 bytes for flags other than 0.
    ///
    /// # Example
    /// ```
    /// use fairlane_memcached::store::{Store, ITEM_HEADER};
    ///
    /// assert_eq!(Store::item_size(3, 0, 10), ITEM_HEADER + 13);
    /// assert_eq!(Store::item_size(3, 7, 10), ITEM_HEADER + 17);
    /// ```
    pub fn item_size(key_len: usize, flags: u32, value_len: usize) -> usize {
        ITEM_HEADER + key_len + value_len + if flags == 0 { 0 } else { 4 }
    }

    /// Whether an item is over the item size limit.
    pub fn too_large(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        Store::item_size(key_len, flags, value_len) > self.item_size_max
    }

    /// The memory limit.
    pub fn memory_limit(&self) -> usize {
        self.account.limit()
    }

    /// Every byte charged against the memory limit now: items, values that
    /// replies still share, reservations.
    pub fn memory_used(&self) -> usize {
        self.account.used()
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

    /// The shard of `key`, locked, and its index.
    fn shard_of(&self, key: &[u8]) -> (usize, MutexGuard<'_, Shard>) {
        let i = self.hasher.hash_one(key) as usize & (self.shards.len() - 1);
        (i, lock(&self.shards[i]))
    }

    /// Publishes shard `i`'s least recently used tick after a change.
    fn publish(&self, i: usize, shard: &Shard) {
        let stamp = shard.tail_stamp();
        // Written only when it moved, to leave the neighbours' cache line
        // alone (see `tails` for the ordering).
        if self.tails[i].load(Ordering::Relaxed) != stamp {
            self.tails[i].store(stamp, Ordering::Relaxed);
        }
    }

    /// The tick a use of an item is stamped with.
    fn current_tick(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }

    /// Evicts least recently used items, across the shards, until the
    /// account is within the limit or nothing is left to evict. The caller
    /// holds no shard's lock.
    fn fit(&self, now: u64) {
        let mut swept = false;
        while self.account.over() {
            if !swept {
                swept = true;
                if self.account.sweep() {
                    continue;
                }
            }
            let oldest = self
                .tails
                .iter()
                .enumerate()
                .map(|(i, t)| (t.load(Ordering::Relaxed), i))
                .min();
            let Some((_, i)) = oldest.filter(|&(stamp, _)| stamp != u64::MAX) else {
                return;
            };
            let mut shard = lock(&self.shards[i]);
            // Another processor may have changed the shard since; what is
            // its least recently used now is as good a choice (its stamp
            // can only have grown), and the one published below is fresh.
            shard.evict_tail(now, &self.account);
            self.publish(i, &shard);
        }
    }

    /// Reserves `bytes` of the memory limit for a command still arriving,
    /// evicting items to make room; `None` if they do not fit even with
    /// every item evicted (other reservations hold the rest).
    pub fn reserve(&self, bytes: usize) -> Option<Reservation> {
        if bytes > self.account.limit() {
            return None;
        }
        let reservation = Reservation::charge(&self.account, bytes);
        self.fit(self.now());
        // Still over: nothing left to evict. The reservation's drop
        // releases its charge.
        (!self.account.over()).then_some(reservation)
    }

    /// Calls `found` with the live item under `key`, if any.
    pub fn get<R>(&self, key: &[u8], found: impl FnOnce(&Item) -> R) -> Option<R> {
        self.get_touch(key, None, found)
    }

    /// Calls `found` with the live item under `key`, if any, after giving
    /// it a new exptime if `touch` has one (`gat`).
    pub fn get_touch<R>(
        &self,
        key: &[u8],
        touch: Option<i64>,
        found: impl FnOnce(&Item) -> R,
    ) -> Option<R> {
        let now = self.now();
        let (i, mut shard) = self.shard_of(key);
        let stamp = self.current_tick();
        let at = shard.find(key, now, stamp, &self.account);
        let stats = &mut shard.stats;
        let hit = at.is_some();
        if touch.is_some() {
            stats.cmd_touch += 1;
            stats.touch_hits += u64::from(hit);
        } else {
            stats.cmd_get += 1;
            stats.get_hits += u64::from(hit);
        }
        self.publish(i, &shard);
        let at = at?;
        if let Some(exptime) = touch {
            shard.item_mut(at).expires = Store::expiry(exptime, now);
        }
        Some(found(shard.item(at)))
    }

    /// A storage command: `value` under `key` as `mode` says.
    pub fn store(&self, mode: Mode, key: &[u8], flags: u32, exptime: i64, value: &[u8]) -> Stored {
        let now = self.now();
        // The new value's copy is made before the lock is taken (append and
        // prepend make theirs under it, from the old value).
        let whole = match mode {
            Mode::Append | Mode::Prepend => None,
            _ => Some(Arc::<[u8]>::from(value)),
        };
        let (i, mut shard) = self.shard_of(key);
        shard.stats.cmd_set += 1;
        let stamp = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let existing = shard.find(key, now, stamp, &self.account);
        let new = match (mode, existing) {
            (Mode::Add, Some(_)) | (Mode::Replace | Mode::Append | Mode::Prepend, None) => {
                self.publish(i, &shard);
                return Stored::NotStored;
            }
            (Mode::Cas(_), None) => {
                self.publish(i, &shard);
                return Stored::NotFound;
            }
            (Mode::Cas(cas), Some(at)) if shard.item(at).cas != cas => {
                self.publish(i, &shard);
                return Stored::Exists;
            }
            (Mode::Append | Mode::Prepend, Some(at)) => {
                let old = shard.item(at);
                if self.too_large(key.len(), old.flags, old.value.len() + value.len()) {
                    self.publish(i, &shard);
                    return Stored::NotStored;
                }
                let (first, second) = match mode {
                    Mode::Append => (&old.value[..], value),
                    _ => (value, &old.value[..]),
                };
                Item {
                    value: [first, second].concat().into(),
                    cas: 0,
                    ..*old
                }
            }
            _ => Item {
                value: whole.unwrap_or_default(),
                flags,
                expires: Store::expiry(exptime, now),
                cas: 0,
            },
        };
        if item_charge(key.len(), new.value.len()) > self.account.limit() {
            // As memcached: a set that fails leaves no stale value behind.
            if let (Mode::Set, Some(at)) = (mode, existing) {
                shard.remove(at, &self.account);
            }
            self.publish(i, &shard);
            return Stored::OutOfMemory;
        }
        shard.put(key, new, existing, stamp, &self.account);
        self.publish(i, &shard);
        drop(shard);
        self.fit(now);
        Stored::Stored
    }

    /// Removes the item under `key`; whether there was a live one.
    pub fn delete(&self, key: &[u8]) -> bool {
        let now = self.now();
        let (i, mut shard) = self.shard_of(key);
        let found = match shard.find(key, now, self.current_tick(), &self.account) {
            Some(at) => {
                shard.remove(at, &self.account);
                true
            }
            None => false,
        };
        self.publish(i, &shard);
        found
    }

    /// Adds `delta` to the number under `key` (wrapping at 2⁶⁴), or
    /// subtracts it (stopping at 0). As memcached: the number is read as C's
    /// `strtoull` reads it (leading white space, a sign, digits, then white
    /// space or the end), and a result no longer than the value is written
    /// over it, padded with spaces to its length.
    pub fn count(&self, key: &[u8], delta: u64, increment: bool) -> Counted {
        let now = self.now();
        let (i, mut shard) = self.shard_of(key);
        let stamp = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(at) = shard.find(key, now, stamp, &self.account) else {
            self.publish(i, &shard);
            return Counted::NotFound;
        };
        self.publish(i, &shard);
        let value = &shard.item(at).value;
        let Some(number) = crate::number::strtoull(value).filter(|_| !value.is_empty()) else {
            return Counted::NotANumber;
        };
        let new = if increment {
            number.wrapping_add(delta)
        } else {
            number.saturating_sub(delta)
        };
        let digits = new.to_string();
        let len = value.len();
        let cas = shard.version();
        let item = shard.item_mut(at);
        item.cas = cas;
        match Arc::get_mut(&mut item.value) {
            // Written in place, as memcached does when no one else holds
            // the item.
            Some(bytes) if digits.len() <= len => {
                bytes[..digits.len()].copy_from_slice(digits.as_bytes());
                bytes[digits.len()..].fill(b' ');
            }
            _ => shard.set_value(at, digits.as_bytes().into(), &self.account),
        }
        drop(shard);
        self.fit(now);
        Counted::Value(new)
    }

    /// Gives the item under `key` a new exptime; whether there was one.
    pub fn touch(&self, key: &[u8], exptime: i64) -> bool {
        self.get_touch(key, Some(exptime), |_| ()).is_some()
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
        for (i, shard) in self.shards.iter().enumerate() {
            let mut shard = lock(shard);
            shard.clear(&self.account);
            self.publish(i, &shard);
        }
    }

    /// Zeroes the counters of [`stats`](Store::stats) that count events.
    pub fn reset_stats(&self) {
        for shard in self.shards.iter() {
            lock(shard).stats = Stats::default();
        }
    }

    /// The counters, summed over the shards (values replies no longer
    /// share are released first, so that `pinned` counts only those still
    /// shared).
    pub fn stats(&self) -> Stats {
        self.account.sweep();
        let mut sum = Stats {
            reserved: self.account.reserved() as u64,
            pinned: self.account.pinned_bytes() as u64,
            ..Stats::default()
        };
        for shard in self.shards.iter() {
            let shard = lock(shard);
            let s = &shard.stats;
            sum.curr_items += shard.len() as u64;
            sum.bytes += shard.charged() as u64;
            sum.total_items += s.total_items;
            sum.cmd_get += s.cmd_get;
            sum.get_hits += s.get_hits;
            sum.cmd_touch += s.cmd_touch;
            sum.touch_hits += s.touch_hits;
            sum.cmd_set += s.cmd_set;
            sum.evictions += s.evictions;
            sum.expired += s.expired;
        }
        sum
    }
}

#[cfg(test)]
mod tests;
