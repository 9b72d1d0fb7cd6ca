//! `accept` on both I/O backends when the peer is gone before the
//! connection is accepted: the listener keeps working, and the addresses
//! come from `accept4` itself.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, UnixListener};
use fairlane::Runtime;

fn runtime(backend: IoBackend) -> Runtime {
    common::backend_runtime(backend, 1)
}

common::on_both_backends!(
    tcp_accept_after_the_peer_reset,
    unix_accept_after_the_peer_left,
    unix_accept_reports_a_bound_peer_path,
);

/// Sets `SO_LINGER {on, 0}`: closing the socket then sends a reset.
fn linger_zero(fd: i32) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads one `linger` from a live local.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
}

/// A connection reset by its client while it waits in the backlog: the
/// `accept`s that follow never fail (the reset one is returned with its
/// address, or skipped), and the next good connection is served.
fn tcp_accept_after_the_peer_reset(backend: IoBackend) {
    let rt = runtime(backend);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Connected (the kernel completes the handshake for the backlog),
        // then closed with linger 0: a reset before anyone accepted it.
        let reset = StdTcpStream::connect(addr).unwrap();
        linger_zero(reset.as_raw_fd());
        let reset_addr = reset.local_addr().unwrap();
        drop(reset);
        let mut good = StdTcpStream::connect(addr).unwrap();
        let good_addr = good.local_addr().unwrap();

        // At most two accepts: the reset connection (if the kernel hands it
        // out) and the good one.
        let mut served: Option<(fairlane::net::TcpStream, SocketAddr)> = None;
        for _ in 0..2 {
            let (stream, peer) = listener
                .accept()
                .await
                .expect("accept after a reset connection");
            assert!(
                peer == reset_addr || peer == good_addr,
                "accept reported {peer}, neither {reset_addr} nor {good_addr}"
            );
            if peer == good_addr {
                served = Some((stream, peer));
                break;
            }
        }
        let (stream, _) = served.expect("the good connection is accepted");
        good.write_all(b"ping").unwrap();
        let (n, buf) = stream.read_owned(Vec::with_capacity(16)).await;
        assert_eq!(&buf[..n.unwrap()], b"ping");
        stream.write_all_owned(b"pong".to_vec()).await.0.unwrap();
        let mut reply = [0u8; 4];
        good.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"pong");
    });
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "fairlane-accept-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Unix client that connected and closed before being accepted: `accept`
/// returns its connection (unnamed address, end of stream), and the next
/// client is served.
fn unix_accept_after_the_peer_left(backend: IoBackend) {
    let dir = TempDir::new(&format!("left-{backend}"));
    let path = dir.path("listener.sock");
    let rt = runtime(backend);
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        drop(StdUnixStream::connect(&path).unwrap());
        let mut good = StdUnixStream::connect(&path).unwrap();

        let (gone, addr) = listener.accept().await.expect("accept a gone peer");
        assert!(addr.is_unnamed(), "{addr:?}");
        assert_eq!(gone.read_owned(Vec::with_capacity(8)).await.0.unwrap(), 0);

        let (stream, addr) = listener.accept().await.expect("accept the next");
        assert!(addr.is_unnamed(), "{addr:?}");
        good.write_all(b"hi").unwrap();
        let (n, buf) = stream.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"hi");
    });
}

/// A Unix socket bound to `path` and connected to `to` (std cannot bind a
/// stream socket before connecting).
fn bound_unix_client(path: &Path, to: &Path) -> StdUnixStream {
    use std::os::unix::ffi::OsStrExt;
    fn sockaddr(path: &Path) -> (libc::sockaddr_un, libc::socklen_t) {
        // SAFETY: all-zero bytes are a valid `sockaddr_un`.
        let mut sun: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        assert!(bytes.len() < sun.sun_path.len());
        for (d, &s) in sun.sun_path.iter_mut().zip(bytes) {
            *d = s as libc::c_char;
        }
        let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
        (sun, len as libc::socklen_t)
    }
    // SAFETY: plain system call, no pointers.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: a new descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let (own, own_len) = sockaddr(path);
    // SAFETY: `own` is a valid address of `own_len` bytes.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&own as *const libc::sockaddr_un).cast(),
            own_len,
        )
    };
    assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
    let (peer, peer_len) = sockaddr(to);
    // SAFETY: as above.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&peer as *const libc::sockaddr_un).cast(),
            peer_len,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    StdUnixStream::from(fd)
}

/// The address `accept` reports for a client bound to a path is that path,
/// also when the client is gone by the time it is accepted.
fn unix_accept_reports_a_bound_peer_path(backend: IoBackend) {
    let dir = TempDir::new(&format!("bound-{backend}"));
    let path = dir.path("listener.sock");
    let client_path = dir.path("client.sock");
    let gone_path = dir.path("gone.sock");
    let rt = runtime(backend);
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        drop(bound_unix_client(&gone_path, &path));
        let _client = bound_unix_client(&client_path, &path);
        let (_, addr) = listener.accept().await.unwrap();
        assert_eq!(addr.as_pathname(), Some(gone_path.as_path()));
        let (_, addr) = listener.accept().await.unwrap();
        assert_eq!(addr.as_pathname(), Some(client_path.as_path()));
    });
}
