//! Reads whose I/O sits in the engine of a processor whose thread does not
//! run the runtime: one that the OS barely lets run, and one that a task
//! blocks in a system call. A task that spins on a processor is rescued by
//! helping; a processor *preempted* by the OS is different: its thread runs
//! nothing it would do itself (reap its ring, run its kernel completion
//! work, poll its readiness set) until it gets a CPU again, while rescuers
//! may drain its engine at the same time (`io/driver.md`, "A processor the
//! OS does not run").
//!
//! The first emulation: processor 1's thread is moved to one CPU beside a
//! busy thread that is not the runtime's, at `SCHED_IDLE`, so that it gets
//! a time slice only now and then. Every connection's server task started
//! there and has its read in flight in that processor's engine. Every
//! connection must still be served, each echo intact and in order, on both
//! backends, within a deadline that only a connection left behind for good
//! trips (how fast is the benchmark's business, not this test's). The
//! second is described at its test.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::net::TcpListener;

common::on_both_backends!(
    connections_of_a_preempted_processor_are_served,
    a_read_of_a_processor_blocked_in_a_system_call_is_served,
);

const CONNECTIONS: usize = 24;
const ROUNDS: usize = 5;

/// How long one echo may take before the client gives up: only a
/// connection left behind for good trips it.
const ECHO_DEADLINE: Duration = Duration::from_secs(20);

fn connections_of_a_preempted_processor_are_served(backend: IoBackend) {
    let Some(cpu) = first_allowed_cpu() else {
        eprintln!("skipped: sched_getaffinity failed, cannot pin threads");
        return;
    };
    let rt = common::backend_runtime(backend, 2);
    let victim = rt.handle().cluster().processors()[1];
    let on_victim = || fairlane::task::Builder::new().affinity([victim]);

    // The victim's thread id, read on the victim itself.
    let tid = rt
        .block_on(
            on_victim()
                .spawn_on(async { gettid() }, rt.handle())
                .unwrap(),
        )
        .unwrap();

    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = ready.clone();
    // The acceptor runs on the victim, and so does every connection task
    // until it has made its first round trip: its next read is submitted
    // there (io_uring: on the victim's ring; fallback: the socket is
    // registered in the victim's poller). Then the restriction is lifted,
    // so any processor may run the task.
    on_victim()
        .spawn_on(
            async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                for _ in 0..CONNECTIONS {
                    let (stream, _) = listener.accept().await.unwrap();
                    let r = r.clone();
                    let mut first = true;
                    let after_echo = move || {
                        if std::mem::take(&mut first) {
                            fairlane::task::set_affinity(None::<Vec<_>>).unwrap();
                            r.fetch_add(1, Ordering::SeqCst);
                        }
                    };
                    fairlane::task::Builder::new()
                        .affinity([victim])
                        .spawn(common::echo_stream(stream, after_echo))
                        .unwrap();
                }
            },
            rt.handle(),
        )
        .unwrap();

    let mut clients: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|c| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(ECHO_DEADLINE)).unwrap();
            echo(&mut s, c, 0);
            s
        })
        .collect();
    // The confirmation comes after the echo's write: wait until every task
    // is back in its read, submitted on the victim.
    common::wait_until("every connection made its first round trip", || {
        ready.load(Ordering::SeqCst) == CONNECTIONS
    });
    std::thread::sleep(Duration::from_millis(20));

    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let busy = std::thread::spawn(move || {
        pin_to(0, cpu);
        while !s.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    pin_to(tid, cpu);
    let demoted = set_idle_policy(tid);
    if !demoted {
        eprintln!("note: SCHED_IDLE refused; the victim only shares a CPU with the busy thread");
    }

    for round in 1..=ROUNDS {
        for (c, s) in clients.iter_mut().enumerate() {
            echo(s, c, round);
        }
    }

    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    drop(clients);
    drop(rt);
}

/// How long the blocking task below blocks its processor at most: far longer
/// than a rescue takes, so a read served only once it gives up fails.
const BLOCK_LIMIT: Duration = Duration::from_secs(20);

/// A read is in flight in processor 1's engine (submitted there) when a
/// task restricted to processor 1 blocks that processor's thread in a
/// system call (`std::thread::sleep`, in short steps) until the read has
/// been served. The thread is asleep in the kernel, neither parked nor
/// running tasks: on io_uring the kernel runs the read's completion work on
/// it all the same, and another processor must reap the completion and run
/// the reading task; on the fallback backend another processor must poll
/// processor 1's readiness set. Without a rescue the read is served only
/// after the blocker gives up, which the test reports.
fn a_read_of_a_processor_blocked_in_a_system_call_is_served(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 2);
    let victim = rt.handle().cluster().processors()[1];
    let (server, mut client) = common::std_pair();
    let submitted = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicBool::new(false));
    let (s, sv) = (submitted.clone(), served.clone());
    let reader = fairlane::task::Builder::new()
        .affinity([victim])
        .spawn_on(
            async move {
                let server = fairlane::net::TcpStream::from_std(server).unwrap();
                // Any processor may run this task from its next wake-up on;
                // its read is submitted here, on the victim.
                fairlane::task::set_affinity(None::<Vec<_>>).unwrap();
                let mut read = std::pin::pin!(server.read_owned(Vec::with_capacity(16)));
                assert!(futures_lite::future::poll_once(read.as_mut())
                    .await
                    .is_none());
                let blocker = fairlane::task::Builder::new()
                    .affinity([victim])
                    .spawn(async move {
                        let start = std::time::Instant::now();
                        while !sv.load(Ordering::SeqCst) && start.elapsed() < BLOCK_LIMIT {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        sv.load(Ordering::SeqCst)
                    })
                    .unwrap();
                s.store(true, Ordering::SeqCst);
                let (n, buf) = read.await;
                served.store(true, Ordering::SeqCst);
                (n.unwrap(), buf, blocker)
            },
            rt.handle(),
        )
        .unwrap();
    common::wait_until("the read is submitted", || submitted.load(Ordering::SeqCst));
    client.write_all(b"ping").unwrap();
    let (n, buf, blocker) = rt.block_on(reader).unwrap();
    assert_eq!(&buf[..n], b"ping");
    assert!(
        rt.block_on(blocker).unwrap(),
        "the read was served only after its processor's thread stopped blocking"
    );
}

/// One round trip of a message naming `client` and `round`, checked.
fn echo(s: &mut TcpStream, client: usize, round: usize) {
    let msg = format!("client {client} round {round}");
    s.write_all(msg.as_bytes()).unwrap();
    let mut got = vec![0; msg.len()];
    if let Err(e) = s.read_exact(&mut got) {
        panic!("client {client}, round {round}: no echo within {ECHO_DEADLINE:?}: {e}");
    }
    assert_eq!(got, msg.as_bytes(), "client {client}, round {round}");
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The first CPU this process may run on.
fn first_allowed_cpu() -> Option<usize> {
    // SAFETY: `set` is a plain bit set the call fills; its size is passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set))
    }
}

/// Pins thread `tid` (0: the calling thread) to `cpu`.
fn pin_to(tid: libc::pid_t, cpu: usize) {
    // SAFETY: as in `first_allowed_cpu`; `tid` is a thread of this process.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

/// Puts thread `tid` at `SCHED_IDLE`; false where that is refused.
fn set_idle_policy(tid: libc::pid_t) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the duration of the call.
    unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) == 0 }
}
