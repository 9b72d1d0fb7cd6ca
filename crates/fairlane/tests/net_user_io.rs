//! The sockets' tokio forms for I/O of the caller's own and for `BufMut`
//! buffers: `try_read_buf`, `try_recv_buf(_from)`, `recv_buf(_from)`,
//! `AsFd`, `try_io`, `async_io`, and `UnixStream::peer_cred`.

mod common;

use std::io::{ErrorKind, Write};
use std::os::fd::{AsFd, AsRawFd};

use fairlane::io::{Interest, IoBackend};
use fairlane::net::{TcpListener, UdpSocket, UnixDatagram, UnixStream};

fn each_backend(f: fn(IoBackend)) {
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        f(backend);
    }
}

#[test]
fn try_read_buf_fills_and_advances_a_buf_mut() {
    each_backend(|backend| {
        let rt = common::backend_runtime(backend, 1);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let mut buf = Vec::with_capacity(3);
            assert_eq!(
                server.try_read_buf(&mut buf).unwrap_err().kind(),
                ErrorKind::WouldBlock
            );
            client.write_all(b"hello").unwrap();
            server.readable().await.unwrap();
            let mut total = 0;
            while total < 5 {
                match server.try_read_buf(&mut buf) {
                    Ok(n) => total += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => server.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(buf, b"hello");
            // A `BytesMut` too, and on a Unix stream.
            let (a, mut b) = UnixStream::pair().unwrap();
            let mut std_b = b.into_std().unwrap();
            std_b.write_all(b"xy").unwrap();
            a.readable().await.unwrap();
            let mut bytes = bytes::BytesMut::with_capacity(8);
            assert_eq!(a.try_read_buf(&mut bytes).unwrap(), 2);
            assert_eq!(&bytes[..], b"xy");
            b = UnixStream::from_std(std_b).unwrap();
            drop(b);
        });
    });
}

#[test]
fn datagram_buf_receives_advance_by_the_datagram() {
    each_backend(|backend| {
        let rt = common::backend_runtime(backend, 1);
        rt.block_on(async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            a.connect(b.local_addr().unwrap()).await.unwrap();
            b.connect(a.local_addr().unwrap()).await.unwrap();
            let mut buf = Vec::with_capacity(32);
            assert_eq!(
                b.try_recv_buf(&mut buf).unwrap_err().kind(),
                ErrorKind::WouldBlock
            );
            a.send(b"one").await.unwrap();
            assert_eq!(b.recv_buf(&mut buf).await.unwrap(), 3);
            a.send(b"two").await.unwrap();
            let (n, from) = b.recv_buf_from(&mut buf).await.unwrap();
            assert_eq!((n, from), (3, a.local_addr().unwrap()));
            a.send(b"three").await.unwrap();
            b.readable().await.unwrap();
            let (n, from) = b.try_recv_buf_from(&mut buf).unwrap();
            assert_eq!((n, from), (5, a.local_addr().unwrap()));
            assert_eq!(buf, b"onetwothree");

            let (x, y) = UnixDatagram::pair().unwrap();
            let mut buf = Vec::with_capacity(16);
            x.send(b"dgram").await.unwrap();
            assert_eq!(y.recv_buf(&mut buf).await.unwrap(), 5);
            x.send(b"!").await.unwrap();
            y.readable().await.unwrap();
            assert_eq!(y.try_recv_buf(&mut buf).unwrap(), 1);
            assert_eq!(buf, b"dgram!");
        });
    });
}

#[test]
fn async_io_waits_until_the_callers_io_does_not_block() {
    each_backend(|backend| {
        let rt = common::backend_runtime(backend, 1);
        rt.block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            let fd = a.as_raw_fd();
            assert_eq!(a.as_fd().as_raw_fd(), fd);
            let peek = || {
                let mut byte = [0u8; 1];
                // SAFETY: one writable byte, on `a`'s open descriptor.
                match unsafe {
                    libc::recv(
                        fd,
                        byte.as_mut_ptr().cast(),
                        1,
                        libc::MSG_PEEK | libc::MSG_DONTWAIT,
                    )
                } {
                    -1 => Err(std::io::Error::last_os_error()),
                    _ => Ok(byte[0]),
                }
            };
            assert_eq!(
                a.try_io(Interest::READABLE, peek).unwrap_err().kind(),
                ErrorKind::WouldBlock
            );
            let mut calls = 0;
            let waiting = a.async_io(Interest::READABLE, || {
                calls += 1;
                peek()
            });
            let writer = async {
                fairlane::task::yield_now().await;
                b.write_all_owned(&b"z"[..]).await.0.unwrap();
            };
            let (got, ()) = futures_lite::future::zip(waiting, writer).await;
            assert_eq!(got.unwrap(), b'z');
            assert!(calls >= 2, "it tried, waited, and tried again");
            assert_eq!(a.try_io(Interest::READABLE, peek).unwrap(), b'z');
        });
    });
}

#[test]
fn peer_cred_names_this_process() {
    let rt = common::backend_runtime(IoBackend::Fallback, 1);
    rt.block_on(async {
        let (a, b) = UnixStream::pair().unwrap();
        for s in [&a, &b] {
            let cred = s.peer_cred().unwrap();
            // SAFETY: plain system calls with no arguments.
            assert_eq!(cred.uid(), unsafe { libc::getuid() });
            assert_eq!(cred.gid(), unsafe { libc::getgid() });
            assert_eq!(cred.pid(), Some(std::process::id() as libc::pid_t));
        }
    });
}
