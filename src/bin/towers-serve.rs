//! Serves this machine's devices to towers on other machines, over Burn's remote backend.
//!
//! ```text
//! cargo run --release --features remote,cuda --bin towers-serve -- --listen 10.0.0.2:3000 --devices cuda:0,cuda:1
//! ```
//!
//! A trainer elsewhere then lists `ws://10.0.0.2:3000/0,ws://10.0.0.2:3000/1` among its devices.
//! The server is Burn's `RemoteServer` over WebSocket: unencrypted and unauthenticated, so listen
//! on a trusted network only. It binds exactly the address given (loopback by default, never all
//! interfaces unless asked) and stops on Ctrl-C or SIGTERM, ending its sessions.
//!
//! Served devices must share one backend (every CubeCL runtime counts as one, so `cuda` and `wgpu`
//! mix; `flex` does not mix with them). A device's index in `--devices` is its index in a client's
//! `ws://host:port/index`. With port 0 the system picks a port; the first line printed names it.

use std::io::Write;
use std::net::TcpListener;

use anyhow::{Context, bail};
use burn::server::{RemoteServer, WebSocketTransport};
use clap::Parser;
use towers_multigpu::parse_devices;
use towers_train::parse_args;

#[derive(Parser)]
#[command(about = "Serve local devices to remote towers (Burn remote backend over WebSocket)")]
struct Args {
    /// Address to listen on, `host:port`. Only this address is bound: give a LAN address (or
    /// 0.0.0.0, on a trusted network) to accept other machines.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: String,
    /// Local devices to serve, e.g. `cuda:0,cuda:1` or `flex`; clients pick one by position.
    #[arg(long, default_value = "flex")]
    devices: String,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let devices = parse_devices(&args.devices)?;
    if let Some(d) = devices.iter().find(|d| d.share() != 1.0) {
        bail!(
            "device `{}`: a server's devices take no `*share`; shares belong to the trainer's list",
            d.name()
        );
    }
    let listener = TcpListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    let served: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| format!("ws://{address}/{i} = {}", d.name()))
        .collect();
    // Flushed at once: a parent process reads the address from this line.
    println!(
        "towers-serve: listening on ws://{address}: {}",
        served.join(", ")
    );
    std::io::stdout().flush()?;

    RemoteServer::new(devices.iter().map(|d| d.device().clone()))
        .serve(WebSocketTransport::from_listener(listener))
        .with_context(|| format!("serving on ws://{address}"))?;
    // Whoever started the server may have stopped reading its output.
    let _ = writeln!(std::io::stdout(), "towers-serve: stopped");
    Ok(())
}
