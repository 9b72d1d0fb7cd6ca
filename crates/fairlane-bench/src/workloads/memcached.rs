//! **memcached**: a memcached server (text protocol) driven over loopback
//! by [`CONNECTIONS`] client connections with a get/set mix of 9:1.
//!
//! The servers: fairlane's (the `fairlane-memcached` crate, on io_uring and
//! on the fallback, two runtime columns), the same protocol code served by
//! tokio, both inside this process, and real memcached (`memcached -t
//! PROCESSORS`, a process of its own; skipped with a message where it is
//! not installed).
//!
//! The clients run on one thread of their own (a tokio current-thread
//! runtime, the same for every server), each connection in a closed loop:
//! one request, its reply, again. Keys are `key:NNNNN` out of [`KEYS`],
//! all stored before the warm-up, values [`VALUE`] bytes. Metrics over the
//! window: `ns/op` (wall time per operation, all connections together),
//! `ops/s`, the p99 of one operation in microseconds, and `cpu/op`: the
//! server's CPU time per operation in microseconds, every thread of the
//! server counted (io_uring's kernel workers are threads of the process)
//! except the load generator's.
//!
//! Where the machine has more cores than the server has processors, the
//! server's threads are pinned to the first `processors` cores and the
//! load generator to the next one (`sched_setaffinity`), so that they do
//! not take turns on one core; otherwise nothing is pinned.

use super::serve::{self, Connection, Load, Units};
use super::server_cpu::ServerProcess;
use super::Emit;
use crate::harness::{seeded_rng, Rng};
use crate::runtimes::BenchRuntime;
use crate::spec::ChildSpec;
use fairlane_core::rand::below;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Client connections.
pub const CONNECTIONS: usize = 64;
/// Distinct keys.
pub const KEYS: u64 = 10_000;
/// Bytes per value.
pub const VALUE: usize = 64;

/// The load generator thread's name (short enough for `comm`, which
/// keeps 15 bytes).
const LOAD_THREAD: &str = "mc-load";

/// Units of the workload: operations (a get or a set).
const OPERATIONS: Units = Units {
    per: "ns/op",
    rate: "ops/s",
    cpu: "cpu/op",
    what: "operation",
};

/// The workload with `rt`'s server ([`BenchRuntime::memcached_serve`]).
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    drive(spec, emit, |listener| {
        rt.memcached_serve(listener)
            .map(|()| ((), ServerProcess::This))
    });
}

/// The workload with the server `start` puts on the listening socket (or
/// on its port), returning once it is accepting (see [`serve::drive`]).
pub fn drive<S>(
    spec: &ChildSpec,
    emit: Emit<'_>,
    start: impl FnOnce(std::net::TcpListener) -> std::io::Result<(S, ServerProcess)>,
) {
    let (connections, seed) = (spec.tasks.max(1), spec.seed);
    serve::drive(
        spec,
        emit,
        &OPERATIONS,
        LOAD_THREAD,
        start,
        move |addr, load| clients(addr, connections, seed, load),
    );
}

/// The load generator: stores every key, then runs `connections`
/// closed-loop clients on this thread.
fn clients(
    addr: std::net::SocketAddr,
    connections: usize,
    seed: u64,
    load: Arc<Load>,
) -> std::io::Result<()> {
    serve::closed_loop(load, async move {
        Client::connect(addr, seeded_rng(seed, 0))
            .await?
            .store_all()
            .await?;
        let mut all = Vec::with_capacity(connections);
        for i in 0..connections {
            all.push(Client::connect(addr, seeded_rng(seed, i as u64 + 1)).await?);
        }
        Ok(all)
    })
}

/// Every value stored.
const VALUE_BYTES: [u8; VALUE] = [b'v'; VALUE];

/// One client connection.
struct Client {
    stream: tokio::io::BufReader<tokio::net::TcpStream>,
    /// Picks the next key, and whether it is a set.
    rng: Rng,
    line: String,
    request: Vec<u8>,
    value: Vec<u8>,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr, rng: Rng) -> std::io::Result<Client> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: tokio::io::BufReader::new(stream),
            rng,
            line: String::new(),
            request: Vec::with_capacity(128),
            value: Vec::with_capacity(VALUE + 2),
        })
    }

    async fn read_line(&mut self) -> std::io::Result<&str> {
        self.line.clear();
        if self.stream.read_line(&mut self.line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(&self.line)
    }

    /// Appends a set of `key` to the request.
    fn push_set(&mut self, key: u64, value: &[u8]) {
        use std::io::Write;
        let _ = write!(self.request, "set key:{key:05} 0 0 {}\r\n", value.len());
        self.request.extend_from_slice(value);
        self.request.extend_from_slice(b"\r\n");
    }

    /// Sends the request and reads `replies` replies to sets.
    async fn stored(&mut self, replies: u64) -> std::io::Result<()> {
        self.stream.get_mut().write_all(&self.request).await?;
        self.request.clear();
        for _ in 0..replies {
            match self.read_line().await? {
                "STORED\r\n" => {}
                other => return Err(std::io::Error::other(format!("set: {other:?}"))),
            }
        }
        Ok(())
    }

    async fn set(&mut self, key: u64) -> std::io::Result<()> {
        self.push_set(key, &VALUE_BYTES);
        self.stored(1).await
    }

    /// Stores every key, a hundred sets per write.
    async fn store_all(&mut self) -> std::io::Result<()> {
        for batch in (0..KEYS).step_by(100) {
            let keys = batch..(batch + 100).min(KEYS);
            let n = keys.end - keys.start;
            keys.for_each(|key| self.push_set(key, &VALUE_BYTES));
            self.stored(n).await?;
        }
        Ok(())
    }

    async fn get(&mut self, key: u64) -> std::io::Result<()> {
        use std::io::Write;
        write!(self.request, "get key:{key:05}\r\n")?;
        self.stream.get_mut().write_all(&self.request).await?;
        self.request.clear();
        loop {
            let line = self.read_line().await?;
            if line == "END\r\n" {
                return Ok(());
            }
            let len = line
                .strip_prefix("VALUE ")
                .and_then(|rest| rest.trim_end().split(' ').nth(2))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| std::io::Error::other(format!("get: {line:?}")))?;
            self.value.resize(len + 2, 0);
            self.stream.read_exact(&mut self.value).await?;
        }
    }
}

impl Connection for Client {
    /// A get, or one time in ten a set, of a random key.
    async fn request(&mut self) -> std::io::Result<()> {
        let r = self.rng.next_u64();
        let key = below(r, KEYS as usize) as u64;
        if below(r >> 32, 10) == 0 {
            self.set(key).await
        } else {
            self.get(key).await
        }
    }
}
