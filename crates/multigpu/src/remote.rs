//! Remote entries of a device list: the devices of a Burn remote server (`towers-serve`) on
//! another machine.
//!
//! | entry | transport |
//! |---|---|
//! | `iroh://ID@10.0.0.2:3000/1` | device 1 of the server whose Iroh id is `ID`, dialed directly at that address: authenticated and encrypted (QUIC), no relay |
//! | `iroh://ID/1` | the same server, found through n0's public relays (it serves with `--relays public`) |
//! | `ws://10.0.0.2:3000/1` | WebSocket: neither encrypted nor authenticated, for a trusted network only |
//!
//! The index defaults to 0. The token a server may ask for is read from the file that
//! `TOWERS_REMOTE_TOKEN_FILE` names, else from `TOWERS_REMOTE_TOKEN`, and never from the command
//! line, where every user of the machine can read it. It is presented to every remote server.

use burn::tensor::Device;

use crate::error::{Error, Result};

/// The schemes of remote entries.
const SCHEMES: [&str; 2] = ["ws://", "iroh://"];

/// The environment variable naming the token file.
pub const TOKEN_FILE_VAR: &str = "TOWERS_REMOTE_TOKEN_FILE";
/// The environment variable holding the token itself.
pub const TOKEN_VAR: &str = "TOWERS_REMOTE_TOKEN";

/// Whether `spec` (an entry without its share) names a remote device.
pub(crate) fn is_remote(spec: &str) -> bool {
    SCHEMES
        .iter()
        .any(|s| strip_prefix_ignore_case(spec, s).is_some())
}

/// The device a remote entry names, connected; `None` when `spec` is not a remote entry.
pub(crate) fn remote_device(entry: &str, spec: &str) -> Option<Result<Device>> {
    let remote = if let Some(rest) = strip_prefix_ignore_case(spec, "ws://") {
        parse_websocket(entry, rest)
    } else if let Some(rest) = strip_prefix_ignore_case(spec, "iroh://") {
        parse_iroh(entry, rest)
    } else {
        return None;
    };
    Some(remote.and_then(|remote| connect(entry, &remote)))
}

/// The token for remote servers, from [`TOKEN_FILE_VAR`] or [`TOKEN_VAR`]; `None` when neither
/// is set. Surrounding white space (a file's last newline) is not part of it.
pub fn remote_token() -> Result<Option<String>> {
    let token = match std::env::var_os(TOKEN_FILE_VAR) {
        Some(path) => std::fs::read_to_string(&path).map_err(|e| {
            Error::Config(format!(
                "cannot read the token file {} ({TOKEN_FILE_VAR}): {e}",
                path.to_string_lossy()
            ))
        })?,
        None => match std::env::var(TOKEN_VAR) {
            Ok(token) => token,
            Err(_) => return Ok(None),
        },
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(Error::Config(format!(
            "the remote token ({TOKEN_FILE_VAR} or {TOKEN_VAR}) is empty"
        )));
    }
    Ok(Some(token.to_string()))
}

/// A remote entry, parsed.
#[derive(Debug, PartialEq)]
struct Remote {
    host: Host,
    index: usize,
}

#[derive(Debug, PartialEq)]
enum Host {
    /// `ws://host:port`.
    WebSocket(String),
    /// A server id and, for a direct connection, its `host:port`.
    Iroh { id: String, address: Option<String> },
}

#[cfg(feature = "remote")]
impl Host {
    /// How errors name the server.
    fn name(&self) -> String {
        match self {
            Host::WebSocket(url) => url.clone(),
            Host::Iroh { id, address: None } => format!("iroh://{id}"),
            Host::Iroh {
                id,
                address: Some(a),
            } => format!("iroh://{id}@{a}"),
        }
    }
}

fn invalid(entry: &str, reason: impl Into<String>) -> Error {
    Error::DeviceList {
        entry: entry.to_string(),
        reason: reason.into(),
    }
}

/// `rest` is `authority[/index]`.
fn split_index<'a>(entry: &str, rest: &'a str) -> Result<(&'a str, usize)> {
    match rest.split_once('/') {
        None => Ok((rest, 0)),
        Some((authority, index)) => index
            .parse::<usize>()
            .map(|index| (authority, index))
            .map_err(|_| invalid(entry, format!("device index `{index}` is not a number"))),
    }
}

fn is_host_port(authority: &str) -> bool {
    matches!(authority.rsplit_once(':'),
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok())
}

fn parse_websocket(entry: &str, rest: &str) -> Result<Remote> {
    let (authority, index) = split_index(entry, rest)?;
    if !is_host_port(authority) {
        return Err(invalid(
            entry,
            "expected `ws://host:port` or `ws://host:port/index`",
        ));
    }
    Ok(Remote {
        host: Host::WebSocket(format!("ws://{authority}")),
        index,
    })
}

fn parse_iroh(entry: &str, rest: &str) -> Result<Remote> {
    let (authority, index) = split_index(entry, rest)?;
    let (id, address) = match authority.split_once('@') {
        None => (authority, None),
        Some((id, address)) if is_host_port(address) => (id, Some(address.to_string())),
        Some(_) => return Err(invalid(entry, "expected `iroh://ID@host:port/index`")),
    };
    if id.is_empty() {
        return Err(invalid(
            entry,
            "expected the server's id, as towers-serve prints it: `iroh://ID@host:port/index`",
        ));
    }
    Ok(Remote {
        host: Host::Iroh {
            id: id.to_string(),
            address,
        },
        index,
    })
}

#[cfg(feature = "remote")]
fn connect(entry: &str, remote: &Remote) -> Result<Device> {
    let failed = |reason: String| Error::Remote {
        entry: entry.to_string(),
        host: remote.host.name(),
        reason,
    };
    let mut host = match &remote.host {
        Host::WebSocket(url) => burn::remote::RemoteHost::websocket(url),
        Host::Iroh { id, address } => burn::remote::RemoteHost::iroh(
            iroh_host(id, address.as_deref()).map_err(|e| invalid(entry, e))?,
        ),
    };
    if let Some(token) = remote_token()? {
        host = host.with_credential(token);
    }
    Device::remote_options(&host)
        .device_index(remote.index)
        .init()
        .map_err(|e| failed(e.to_string()))
}

/// The Iroh server `id`: dialed directly at every address `address` resolves to, relays off;
/// or, without an address, through n0's public relays.
#[cfg(feature = "remote")]
fn iroh_host(
    id: &str,
    address: Option<&str>,
) -> std::result::Result<burn::remote::IrohHost, String> {
    use std::net::ToSocketAddrs;

    use burn::remote::{EndpointId, IrohHost, IrohRelays};

    let id: EndpointId = id
        .parse()
        .map_err(|e| format!("`{id}` is not an Iroh server id: {e}"))?;
    let Some(address) = address else {
        return Ok(IrohHost::new(id));
    };
    let addresses = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{address}`: {e}"))?;
    Ok(addresses.fold(
        IrohHost::new(id).with_relays(IrohRelays::Disabled),
        IrohHost::with_address,
    ))
}

#[cfg(not(feature = "remote"))]
fn connect(entry: &str, _remote: &Remote) -> Result<Device> {
    Err(Error::BackendNotCompiled {
        entry: entry.to_string(),
        feature: "remote",
    })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    fn parsed(spec: &str) -> Result<Remote> {
        let (scheme, rest) = spec.split_once("://").unwrap();
        match scheme {
            "ws" => parse_websocket(spec, rest),
            _ => parse_iroh(spec, rest),
        }
    }

    #[test]
    fn entries_name_a_server_and_a_device() {
        let iroh = |id: &str, address: Option<&str>| Host::Iroh {
            id: id.into(),
            address: address.map(Into::into),
        };
        let cases = [
            (
                "ws://10.0.0.2:3000/1",
                Host::WebSocket("ws://10.0.0.2:3000".into()),
                1,
            ),
            ("ws://gpu:3000", Host::WebSocket("ws://gpu:3000".into()), 0),
            (
                "iroh://abc@10.0.0.2:3000/2",
                iroh("abc", Some("10.0.0.2:3000")),
                2,
            ),
            ("iroh://abc/1", iroh("abc", None), 1),
            ("iroh://abc", iroh("abc", None), 0),
        ];
        for (spec, host, index) in cases {
            assert_eq!(parsed(spec).unwrap(), Remote { host, index }, "{spec}");
        }
    }

    #[test]
    fn malformed_entries_say_what_was_expected() {
        for spec in [
            "ws://host",
            "ws://:3000",
            "ws://host:3000/x",
            "iroh://@10.0.0.2:3000/0",
            "iroh://abc@10.0.0.2/0",
            "iroh:///0",
        ] {
            let err = parsed(spec).unwrap_err().to_string();
            assert_error_names(&err, &[spec]);
            assert!(
                err.contains("expected") || err.contains("is not a number"),
                "{spec}: {err}"
            );
        }
    }
}
