//! Loopback remote devices for the remote benchmark: servers, and a relay that counts bytes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use burn::server::{RemoteServer, WebSocketTransport};
use burn::tensor::Device;

/// A `RemoteServer` serving flex on a loopback port of its own, on a thread that lives as long
/// as the process (`serve` returns on Ctrl-C or SIGTERM).
pub fn serve_flex() -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    thread::spawn(move || {
        RemoteServer::new([Device::flex()])
            .serve(WebSocketTransport::from_listener(listener))
            .expect("a loopback server");
    });
    Ok(format!("127.0.0.1:{}", address.port()))
}

/// A TCP relay on a loopback port of its own that forwards every connection to `target` and
/// adds the bytes it carries, both ways, to `bytes`. Written here because the count must be of
/// what crosses the socket, independent of Burn's own bookkeeping.
pub fn counting_relay(target: String, bytes: Arc<AtomicU64>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = format!("127.0.0.1:{}", listener.local_addr()?.port());
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&target) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                let bytes = bytes.clone();
                thread::spawn(move || {
                    let _ = from.set_nodelay(true);
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
            }
        }
    });
    Ok(address)
}
