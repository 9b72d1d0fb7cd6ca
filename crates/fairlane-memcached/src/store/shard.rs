//! One shard of the store: a hash map from keys to nodes, the nodes in a
//! least-recently-used list, and what they are charged in the memory
//! account.
//!
//! Each node carries a stamp, the store's tick when it was last used, so
//! that the store can compare the least recently used items of different
//! shards and evict the oldest of them (see [`Store`](super::Store)). The
//! list keeps the shard's own order; the stamps only order shards.
//!
//! What a shard charges: each item's key twice (the node's and the map's),
//! its value with its reference counts, and the tables (the node slab and
//! the map) at their capacity, so that many small items are counted at
//! what they cost and not only at their bytes.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Arc;

use slab::Slab;

use super::memory::{value_charge, Account};
use super::{Item, Stats};

/// No neighbour in the LRU list.
const NIL: usize = usize::MAX;

/// Bytes of the node slab per slot.
const NODE_SLOT: usize = size_of::<Node>() + size_of::<usize>();

/// Bytes of the map per slot it has room for: the entry, its control byte,
/// and the eighth of the table a map keeps empty.
const INDEX_SLOT: usize = (size_of::<(Box<[u8]>, usize)>() + 1) * 8 / 7 + 1;

/// The bytes an item of `key_len` and `value_len` bytes is charged,
/// besides its share of the tables.
pub(crate) fn item_charge(key_len: usize, value_len: usize) -> usize {
    2 * key_len + value_charge(value_len)
}

struct Node {
    key: Box<[u8]>,
    item: Item,
    /// The store's tick when the item was last used.
    stamp: u64,
    /// Towards the most recently used.
    prev: usize,
    /// Towards the least recently used.
    next: usize,
}

pub(super) struct Shard {
    index: HashMap<Box<[u8]>, usize>,
    nodes: Slab<Node>,
    /// The most recently used.
    head: usize,
    /// The least recently used, evicted first.
    tail: usize,
    /// Bytes charged for the items (not the tables).
    pub(super) bytes: usize,
    /// Bytes charged for the tables.
    tables: usize,
    /// The next cas version's count: versions are `count * stride + id`,
    /// so that no two shards hand out the same one.
    next_cas: u64,
    id: u64,
    stride: u64,
    pub(super) stats: Stats,
}

impl Shard {
    pub(super) fn new(id: usize, stride: usize) -> Shard {
        Shard {
            index: HashMap::new(),
            nodes: Slab::new(),
            head: NIL,
            tail: NIL,
            bytes: 0,
            tables: 0,
            next_cas: 1,
            id: id as u64,
            stride: stride as u64,
            stats: Stats::default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes charged for the items and the tables.
    pub(super) fn charged(&self) -> usize {
        self.bytes + self.tables
    }

    /// A new cas version.
    pub(super) fn version(&mut self) -> u64 {
        let v = self.next_cas * self.stride + self.id;
        self.next_cas += 1;
        v
    }

    /// The stamp of the least recently used item; `u64::MAX` when empty.
    pub(super) fn tail_stamp(&self) -> u64 {
        match self.tail {
            NIL => u64::MAX,
            t => self.nodes[t].stamp,
        }
    }

    pub(super) fn item(&self, at: usize) -> &Item {
        &self.nodes[at].item
    }

    pub(super) fn item_mut(&mut self, at: usize) -> &mut Item {
        &mut self.nodes[at].item
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

    /// Makes the node at `at` the most recently used, at `stamp`.
    pub(super) fn bump(&mut self, at: usize, stamp: u64) {
        self.nodes[at].stamp = stamp;
        if self.head != at {
            self.unlink(at);
            self.push_front(at);
        }
    }

    /// Re-charges the tables at their capacity.
    fn charge_tables(&mut self, account: &Account) {
        let tables = self.nodes.capacity() * NODE_SLOT + self.index.capacity() * INDEX_SLOT;
        if tables > self.tables {
            account.charge(tables - self.tables);
        } else {
            account.release(self.tables - tables);
        }
        self.tables = tables;
    }

    /// Removes the node at `at`, letting its value go.
    pub(super) fn remove(&mut self, at: usize, account: &Account) {
        self.unlink(at);
        let node = self.nodes.remove(at);
        self.index.remove(&node.key);
        let charge = item_charge(node.key.len(), node.item.value.len());
        self.bytes -= charge;
        account.release(charge - value_charge(node.item.value.len()));
        account.let_go(node.item.value);
    }

    /// The live item under `key`, made the most recently used at `stamp`;
    /// an expired one is removed on the way.
    pub(super) fn find(
        &mut self,
        key: &[u8],
        now: u64,
        stamp: u64,
        account: &Account,
    ) -> Option<usize> {
        let at = *self.index.get(key)?;
        if self.nodes[at].item.expired(now) {
            self.remove(at, account);
            self.stats.expired += 1;
            return None;
        }
        self.bump(at, stamp);
        Some(at)
    }

    /// Stores `item` under `key`, in the node at `existing` if there is
    /// one (its old value let go), as the most recently used at `stamp`.
    pub(super) fn put(
        &mut self,
        key: &[u8],
        mut item: Item,
        existing: Option<usize>,
        stamp: u64,
        account: &Account,
    ) {
        item.cas = self.version();
        self.stats.total_items += 1;
        match existing {
            Some(at) => {
                let charge = value_charge(item.value.len());
                account.charge(charge);
                self.bytes += charge;
                let old = std::mem::replace(&mut self.nodes[at].item, item);
                self.bytes -= value_charge(old.value.len());
                account.let_go(old.value);
                self.bump(at, stamp);
            }
            None => {
                let charge = item_charge(key.len(), item.value.len());
                account.charge(charge);
                self.bytes += charge;
                let key: Box<[u8]> = key.into();
                let at = self.nodes.insert(Node {
                    key: key.clone(),
                    item,
                    stamp,
                    prev: NIL,
                    next: NIL,
                });
                self.push_front(at);
                self.index.insert(key, at);
                self.charge_tables(account);
            }
        }
    }

    /// Gives the item at `at` a new value, letting the old one go.
    pub(super) fn set_value(&mut self, at: usize, value: Arc<[u8]>, account: &Account) {
        let new = value_charge(value.len());
        account.charge(new);
        self.bytes += new;
        let old = std::mem::replace(&mut self.nodes[at].item.value, value);
        self.bytes -= value_charge(old.len());
        account.let_go(old);
    }

    /// Evicts the least recently used item (counted as expired if it had);
    /// whether there was one.
    pub(super) fn evict_tail(&mut self, now: u64, account: &Account) -> bool {
        let at = self.tail;
        if at == NIL {
            return false;
        }
        if self.nodes[at].item.expired(now) {
            self.stats.expired += 1;
        } else {
            self.stats.evictions += 1;
        }
        self.remove(at, account);
        true
    }

    /// Removes every item, and gives the tables' memory back.
    pub(super) fn clear(&mut self, account: &Account) {
        while self.head != NIL {
            self.remove(self.head, account);
        }
        self.nodes = Slab::new();
        self.index = HashMap::new();
        self.charge_tables(account);
    }
}
