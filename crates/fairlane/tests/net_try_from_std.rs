//! `TryFrom` the std socket types (as `from_std`) and `UnixStream::pair`,
//! on both I/O backends: the adopted sockets carry data.

mod common;

use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};

common::on_both_backends!(tcp_and_udp_try_from_std, unix_try_from_std_and_pair);

fn tcp_and_udp_try_from_std(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let l = TcpListener::try_from(std::net::TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
        let std_s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let s = TcpStream::try_from(std_s).unwrap();
        let (accepted, _) = l.accept().await.unwrap();
        s.write_all_owned("tcp").await.0.unwrap();
        let (n, buf) = accepted.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"tcp");

        let u = UdpSocket::try_from(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
        u.send_to(b"udp", u.local_addr().unwrap()).await.unwrap();
        let mut buf = [0u8; 8];
        let (n, _) = u.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"udp");
    });
}

fn unix_try_from_std_and_pair(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let (a, b) = UnixStream::pair().unwrap();
        a.write_all_owned("pair").await.0.unwrap();
        let (n, buf) = b.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"pair");

        let path =
            std::env::temp_dir().join(format!("fairlane-tryfrom-{}-{backend}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l =
            UnixListener::try_from(std::os::unix::net::UnixListener::bind(&path).unwrap()).unwrap();
        let c =
            UnixStream::try_from(std::os::unix::net::UnixStream::connect(&path).unwrap()).unwrap();
        let (accepted, _) = l.accept().await.unwrap();
        c.write_all_owned("unix").await.0.unwrap();
        let (n, buf) = accepted.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"unix");
        std::fs::remove_file(&path).unwrap();

        let (x, y) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let (x, y) = (
            UnixDatagram::try_from(x).unwrap(),
            UnixDatagram::try_from(y).unwrap(),
        );
        x.send(b"dgram").await.unwrap();
        let mut buf = [0u8; 8];
        let n = y.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"dgram");
    });
}
