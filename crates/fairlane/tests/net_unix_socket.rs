//! `UnixSocket` (stream: bind + listen, connect; datagram: bind +
//! datagram; the wrong conversion for its type is an error) and
//! `UnixListener::bind_addr`/`UnixStream::connect_addr` with a path and an
//! abstract name (also named by a path with a leading NUL), on both I/O
//! backends.

mod common;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use std::path::PathBuf;

use fairlane::io::IoBackend;
use fairlane::net::{UnixListener, UnixSocket, UnixStream};

common::on_both_backends!(
    stream_listen_and_connect,
    datagram_echo,
    conversions_check_the_type,
    bind_addr_and_connect_addr,
    leading_nul_path_is_an_abstract_name,
);

fn temp(name: &str, backend: IoBackend) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "fairlane-{name}-{}-{backend:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    p
}

fn stream_listen_and_connect(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let path = temp("usock-stream", backend);
    rt.block_on(async {
        let sock = UnixSocket::new_stream().unwrap();
        sock.bind(&path).unwrap();
        let listener = sock.listen(8).unwrap();
        let client = UnixSocket::new_stream()
            .unwrap()
            .connect(&path)
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all_owned("ping").await.0.unwrap();
        let (n, buf) = server.read_owned(Vec::with_capacity(8)).await;
        assert_eq!(&buf[..n.unwrap()], b"ping");
        assert_eq!(
            listener.local_addr().unwrap().as_pathname(),
            Some(path.as_path())
        );
    });
    std::fs::remove_file(&path).unwrap();
}

fn datagram_echo(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let server_path = temp("usock-dgram-server", backend);
    let client_path = temp("usock-dgram-client", backend);
    rt.block_on(async {
        let server = UnixSocket::new_datagram().unwrap();
        server.bind(&server_path).unwrap();
        let server = server.datagram().unwrap();
        let client = UnixSocket::new_datagram().unwrap();
        client.bind(&client_path).unwrap();
        let client = client.datagram().unwrap();
        client.send_to(b"echo", &server_path).await.unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        server
            .send_to(&buf[..n], from.as_pathname().unwrap())
            .await
            .unwrap();
        let n = client.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"echo");
    });
    std::fs::remove_file(&server_path).unwrap();
    std::fs::remove_file(&client_path).unwrap();
}

fn conversions_check_the_type(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let path = temp("usock-types", backend);
    rt.block_on(async {
        let err = UnixSocket::new_datagram().unwrap().listen(8).unwrap_err();
        assert!(err.to_string().contains("datagram socket"), "{err}");
        let err = UnixSocket::new_datagram()
            .unwrap()
            .connect(&path)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("datagram socket"), "{err}");
        let err = UnixSocket::new_stream().unwrap().datagram().unwrap_err();
        assert!(err.to_string().contains("stream socket"), "{err}");
        let err = UnixSocket::new_stream().unwrap().bind("").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let err = UnixSocket::new_stream()
            .unwrap()
            .connect(&path)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    });
}

fn bind_addr_and_connect_addr(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    let path = temp("usock-bind-addr", backend);
    rt.block_on(async {
        for addr in [
            SocketAddr::from_pathname(&path).unwrap(),
            SocketAddr::from_abstract_name(
                format!("fairlane-abstract-{}-{backend:?}", std::process::id()).as_bytes(),
            )
            .unwrap(),
        ] {
            let listener = UnixListener::bind_addr(&addr).unwrap();
            let client = UnixStream::connect_addr(&addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            server.write_all_owned("x").await.0.unwrap();
            let (n, buf) = client.read_owned(Vec::with_capacity(2)).await;
            assert_eq!(&buf[..n.unwrap()], b"x");
            let local = listener.local_addr().unwrap();
            assert_eq!(local.as_pathname(), addr.as_pathname());
            assert_eq!(local.as_abstract_name(), addr.as_abstract_name());
        }
        // An unnamed address names nothing.
        let unnamed = std::os::unix::net::UnixDatagram::unbound()
            .unwrap()
            .local_addr()
            .unwrap();
        let err = UnixListener::bind_addr(&unnamed).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let err = UnixStream::connect_addr(&unnamed).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    });
    std::fs::remove_file(&path).unwrap();
}

fn leading_nul_path_is_an_abstract_name(backend: IoBackend) {
    let rt = common::backend_runtime(backend, 1);
    rt.block_on(async {
        let name = format!("fairlane-nul-{}-{backend:?}", std::process::id());
        let path = format!("\0{name}");
        let listener = UnixListener::bind(&path).unwrap();
        assert_eq!(
            listener.local_addr().unwrap().as_abstract_name(),
            Some(name.as_bytes())
        );
        let (client, accepted) =
            futures_lite::future::zip(UnixStream::connect(&path), listener.accept()).await;
        let (server, _) = accepted.unwrap();
        client.unwrap().write_all_owned("x").await.0.unwrap();
        let (n, buf) = server.read_owned(Vec::with_capacity(2)).await;
        assert_eq!(&buf[..n.unwrap()], b"x");
    });
}
