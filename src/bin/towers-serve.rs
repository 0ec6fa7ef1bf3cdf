//! Serves this machine's devices to towers on other machines, over Burn's remote backend.
//!
//! ```text
//! TOWERS_REMOTE_TOKEN_FILE=~/.towers-token \
//!   cargo run --release --features remote,cuda --bin towers-serve -- \
//!   --listen 10.0.0.2:3000 --devices cuda:0,cuda:1 --identity ~/.towers-serve.key
//! ```
//!
//! The first line printed names the entries a trainer elsewhere lists among its devices, e.g.
//! `iroh://ID@10.0.0.2:3000/0,iroh://ID@10.0.0.2:3000/1` (with the same token in its
//! environment). Over Iroh (the default) sessions are encrypted and the server is authenticated by
//! its id; a token (read from the file `TOWERS_REMOTE_TOKEN_FILE` names, or from
//! `TOWERS_REMOTE_TOKEN`, never from the command line) authenticates the clients. Without a token
//! the server refuses to start unless `--insecure-no-token` says to serve every client that
//! reaches it. WebSocket (`--transport websocket`) is not encrypted: a trusted network only.
//!
//! What is bounded, and what is not (Burn 0.22.1's `burn-remote`, read 2026-11-28):
//! - Who: only clients presenting the token open a session (`TokenAuthorizer`, asked on every
//!   session before the client learns anything about the devices).
//! - Where: WebSocket binds exactly `--listen`. Iroh binds `0.0.0.0:PORT` and `[::]:PORT`,
//!   every interface: `IrohTransport::with_port` takes a port, not an address
//!   (`IrohTransport::bind_endpoint` in burn-remote). Binding one address would take our own Iroh
//!   endpoint under `RemoteServer::into_protocol`, with the identity's secret key, which
//!   `IrohIdentity` does not hand out.
//! - Frames: 1 GiB at most, on both transports (`MAX_FRAME_SIZE`, burn-communication's
//!   `MAX_MESSAGE_SIZE`).
//! - Not bounded: the number of sessions and the memory a client's tensors take. The server's
//!   only per-session hook is the authorizer, called when a session opens and never when it
//!   closes (the session-closed event exists only in telemetry, a lossy broadcast that drops
//!   events when it falls behind): a count kept there would only grow, and refuse everyone in
//!   the end. So the token is what keeps strangers off the devices; a client holding it is
//!   trusted with all of their memory.
//!
//! Served devices must share one backend (every CubeCL runtime counts as one, so `cuda` and `wgpu`
//! mix; `flex` does not mix with them). A device's index in `--devices` is its index in a client's
//! entry. With port 0 a free port is picked. The server stops on Ctrl-C or SIGTERM, ending its
//! sessions.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};

use anyhow::{Context, bail};
use burn::server::{
    IrohIdentity, IrohRelays, IrohTransport, RemoteServer, TokenAuthorizer, Transport,
    WebSocketTransport,
};
use clap::{Parser, ValueEnum};
use towers_multigpu::remote::{TOKEN_FILE_VAR, TOKEN_VAR};
use towers_multigpu::{TowerDevice, parse_devices, remote_token};
use towers_train::parse_args;

#[derive(Parser)]
#[command(about = "Serve local devices to remote towers (Burn's remote backend)")]
struct Args {
    /// Address clients dial, `host:port`. WebSocket binds exactly this address; Iroh binds the
    /// UDP port on every interface (Burn's Iroh transport takes a port only), where only clients
    /// that know the server's id and hold its token are served.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Serve without a token: every client that reaches the server may use its devices.
    #[arg(long)]
    insecure_no_token: bool,
    /// Local devices to serve, e.g. `cuda:0,cuda:1` or `flex`; clients pick one by position.
    #[arg(long, default_value = "flex")]
    devices: String,
    /// `iroh`: encrypted, the server authenticated by its id. `websocket`: plain text, for a
    /// trusted network only.
    #[arg(long, value_enum, default_value_t = TransportKind::Iroh)]
    transport: TransportKind,
    /// Iroh: the file holding the server's secret key, created on first use, so that its id
    /// (the address clients dial) survives restarts. Without it, every start has a new id.
    #[arg(long)]
    identity: Option<std::path::PathBuf>,
    /// Iroh: `disabled` (clients dial `--listen` directly), `public` (n0's relays, which also
    /// find the server by its id alone) or a private relay's URL.
    #[arg(long, default_value = "disabled")]
    relays: IrohRelays,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportKind {
    Iroh,
    Websocket,
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
    let token = remote_token()?;
    if token.is_none() && !args.insecure_no_token {
        bail!(
            "no token: put one in the file {TOKEN_FILE_VAR} names (or in {TOKEN_VAR}) so that \
             only clients holding it are served, or pass --insecure-no-token to serve every \
             client that reaches this address"
        );
    }
    let (transport, base) = match args.transport {
        TransportKind::Iroh => iroh(&args)?,
        TransportKind::Websocket => websocket(&args)?,
    };
    warn_about(args.transport, token.is_some());
    let served: Vec<String> = (devices.iter().enumerate())
        .map(|(i, d)| format!("{base}/{i} = {}", d.name()))
        .collect();
    // Flushed at once: a parent process reads the entries from this line.
    println!("towers-serve: listening on {base}: {}", served.join(", "));
    std::io::stdout().flush()?;

    let mut server = RemoteServer::new(devices.iter().map(TowerDevice::device).cloned());
    if let Some(token) = token {
        server = server.with_authorizer(TokenAuthorizer::new(token)?);
    }
    server
        .serve(transport)
        .with_context(|| format!("serving on {base}"))?;
    // Whoever started the server may have stopped reading its output.
    let _ = writeln!(std::io::stdout(), "towers-serve: stopped");
    Ok(())
}

/// The Iroh transport, and the base of the entries clients list.
fn iroh(args: &Args) -> anyhow::Result<(Transport, String)> {
    let identity = match &args.identity {
        Some(path) => IrohIdentity::load_or_create(path)
            .with_context(|| format!("the server identity {}", path.display()))?,
        None => IrohIdentity::random(),
    };
    let port = match args.listen.port() {
        // Iroh reports no port it picked itself, so pick a free one first.
        0 => UdpSocket::bind((args.listen.ip(), 0))?.local_addr()?.port(),
        port => port,
    };
    let transport = IrohTransport::new(identity)
        .with_relays(args.relays.clone())
        .with_port(port);
    let base = match args.relays {
        IrohRelays::Disabled => format!("iroh://{}@{}:{port}", transport.id(), args.listen.ip()),
        _ => format!("iroh://{}", transport.id()),
    };
    Ok((transport.into(), base))
}

/// The WebSocket transport on exactly `--listen`, and the base of the entries clients list.
fn websocket(args: &Args) -> anyhow::Result<(Transport, String)> {
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let base = format!("ws://{}", listener.local_addr()?);
    Ok((WebSocketTransport::from_listener(listener).into(), base))
}

/// What this setup leaves open, on stderr.
fn warn_about(transport: TransportKind, has_token: bool) {
    let warning = match (transport, has_token) {
        (TransportKind::Iroh, true) => return,
        (TransportKind::Iroh, false) => {
            "--insecure-no-token: every client that knows this server's id can use its devices"
        }
        (TransportKind::Websocket, true) => {
            "WebSocket sends the token and every tensor in plain text: use it on a trusted \
             network only, or `--transport iroh` (clients send the token only from a token line \
             naming this server, `ws://host:port=TOKEN`)"
        }
        (TransportKind::Websocket, false) => {
            "--insecure-no-token over WebSocket: unencrypted, and every client that reaches this \
             address can use its devices"
        }
    };
    eprintln!("towers-serve: warning: {warning}");
}
