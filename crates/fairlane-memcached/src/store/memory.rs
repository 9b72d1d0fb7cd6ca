//! The store's memory account: one count of every byte held against the
//! memory limit, whoever holds it.
//!
//! - Items: their keys, values and their share of the shards' tables
//!   (charged by the shards, see `shard.rs`).
//! - Values a reply still shares after the store let them go (a value
//!   replaced or deleted while a connection is still writing it): they stay
//!   charged, in the pinned list, until no reply holds them.
//! - Room reserved by connections for commands still arriving (a large
//!   value, a long get line): a [`Reservation`], charged until dropped.
//!
//! The store evicts items while the count is over the limit, so that what
//! clients make the server hold stays within `-m` however they send it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes charged for a value besides its bytes: the reference counts in
/// front of them.
pub(crate) const VALUE_HEADER: usize = 2 * std::mem::size_of::<usize>();

/// The bytes a value of `len` bytes is charged.
pub(crate) fn value_charge(len: usize) -> usize {
    len + VALUE_HEADER
}

/// The count, shared by the store and its reservations.
#[derive(Debug)]
pub(crate) struct Account {
    limit: usize,
    /// Every byte charged. Relaxed throughout: a lone counter that orders
    /// no other memory; a stale reading only delays an eviction to the next
    /// store, or makes one more.
    used: AtomicUsize,
    /// The part of `used` that reservations hold (for `stats`).
    reserved: AtomicUsize,
    /// Values let go by the store while still shared with a reply.
    pinned: Mutex<Vec<Arc<[u8]>>>,
    /// `pinned`'s length, read without its lock so that a store with none
    /// pinned never takes it. Relaxed: a hint; the lock orders the list.
    pinned_len: AtomicUsize,
}

impl Account {
    pub(crate) fn new(limit: usize) -> Account {
        Account {
            limit,
            used: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            pinned: Mutex::new(Vec::new()),
            pinned_len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    pub(crate) fn charge(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Whether more is charged than the limit allows.
    pub(crate) fn over(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.limit
    }

    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// The store no longer holds `value`: its charge goes, unless a reply
    /// still shares it, in which case it stays charged until
    /// [`sweep`](Self::sweep) finds it unshared.
    ///
    /// Replies take their share of a value under its shard's lock, which
    /// the caller holds: no share can appear after the count is read, only
    /// go, so a count of one means the value is the store's alone.
    pub(crate) fn let_go(&self, value: Arc<[u8]>) {
        if Arc::strong_count(&value) == 1 {
            self.release(value_charge(value.len()));
            return;
        }
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        pinned.push(value);
        self.pinned_len.store(pinned.len(), Ordering::Relaxed);
    }

    /// Releases the pinned values no reply shares any more; whether there
    /// were any.
    pub(crate) fn sweep(&self) -> bool {
        if self.pinned_len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        let before = pinned.len();
        pinned.retain(|value| {
            // The list holds the only other share: once it is alone, no
            // one can take a new one.
            let shared = Arc::strong_count(value) > 1;
            if !shared {
                self.release(value_charge(value.len()));
            }
            shared
        });
        self.pinned_len.store(pinned.len(), Ordering::Relaxed);
        pinned.len() < before
    }

    /// The bytes pinned values hold.
    pub(crate) fn pinned_bytes(&self) -> usize {
        let pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        pinned.iter().map(|v| value_charge(v.len())).sum()
    }
}

/// Room held against the store's memory limit for a command still
/// arriving, released when dropped.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use fairlane_memcached::store::{Config, Store, SystemClock};
///
/// let store = Store::new(Config { memory_limit: 1 << 20, ..Config::default() }, Arc::new(SystemClock));
/// let room = store.reserve(600 << 10).expect("fits");
/// assert!(store.reserve(600 << 10).is_none(), "the first holds most of the limit");
/// drop(room);
/// assert!(store.reserve(600 << 10).is_some());
/// ```
#[derive(Debug)]
pub struct Reservation {
    account: Arc<Account>,
    bytes: usize,
}

impl Reservation {
    /// Charges `bytes` to `account` (the caller then makes room, and gives
    /// the reservation up if it cannot).
    pub(crate) fn charge(account: &Arc<Account>, bytes: usize) -> Reservation {
        account.charge(bytes);
        account.reserved.fetch_add(bytes, Ordering::Relaxed);
        Reservation {
            account: account.clone(),
            bytes,
        }
    }

    /// The bytes held.
    ///
    /// # Example
    /// ```
    /// use std::sync::Arc;
    /// use fairlane_memcached::store::{Config, Store, SystemClock};
    ///
    /// let store = Store::new(Config::default(), Arc::new(SystemClock));
    /// assert_eq!(store.reserve(1000).unwrap().bytes(), 1000);
    /// ```
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.account
            .reserved
            .fetch_sub(self.bytes, Ordering::Relaxed);
        self.account.release(self.bytes);
    }
}
