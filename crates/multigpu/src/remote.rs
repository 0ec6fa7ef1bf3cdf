//! Remote entries of a device list: the devices of a Burn remote server (`towers-serve`) on
//! another machine.
//!
//! | entry | transport |
//! |---|---|
//! | `iroh://ID@10.0.0.2:3000/1` | device 1 of the server whose Iroh id is `ID`, dialed directly at that address: authenticated and encrypted (QUIC), no relay |
//! | `iroh://ID/1` | the same server, found through n0's public relays (it serves with `--relays public`) |
//! | `ws://10.0.0.2:3000/1` | WebSocket: neither encrypted nor authenticated, for a trusted network only |
//!
//! The index defaults to 0. The tokens servers ask for are read from the file that
//! `TOWERS_REMOTE_TOKEN_FILE` names, else from `TOWERS_REMOTE_TOKEN`, and never from the command
//! line, where every user of the machine can read it. Either holds one token per line: a line
//! `iroh://ID=TOKEN` or `ws://host:port=TOKEN` is that server's token, a line without a scheme
//! the token of every Iroh server the file does not name (blank lines and `#` comments are
//! skipped). A WebSocket server only ever gets a token from a line naming it: `ws://` is plain
//! text, so the general token is never sent there unasked.

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

/// The tokens for remote servers, from [`TOKEN_FILE_VAR`] or [`TOKEN_VAR`] (empty when
/// neither is set), in the format the module documentation gives.
pub fn remote_tokens() -> Result<Tokens> {
    let (text, source) = match std::env::var_os(TOKEN_FILE_VAR) {
        Some(path) => {
            let source = format!(
                "the token file {} ({TOKEN_FILE_VAR})",
                path.to_string_lossy()
            );
            let text = std::fs::read_to_string(&path).map_err(|error| Error::TokenFile {
                path: path.clone().into(),
                error,
            })?;
            (text, source)
        }
        None => match std::env::var(TOKEN_VAR) {
            Ok(text) => (text, TOKEN_VAR.to_string()),
            Err(_) => return Ok(Tokens::default()),
        },
    };
    Tokens::parse(&text).map_err(|reason| Error::Config(format!("{source}: {reason}")))
}

/// The token a server asks its clients for: the general (unnamed) token of [`remote_tokens`];
/// `None` when neither variable is set.
pub fn remote_token() -> Result<Option<String>> {
    let tokens = remote_tokens()?;
    if tokens.general.is_none() && !tokens.per_host.is_empty() {
        return Err(Error::Config(format!(
            "{TOKEN_FILE_VAR}/{TOKEN_VAR}: a server needs a token line without a host; this one \
             names hosts only"
        )));
    }
    Ok(tokens.general)
}

/// The tokens a client presents: one per named server, and a general one for the other Iroh
/// servers.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Tokens {
    /// For Iroh servers no line names; never sent over `ws://`.
    pub general: Option<String>,
    /// `(iroh://ID or ws://host:port, token)`, as the lines name them.
    pub per_host: Vec<(String, String)>,
}

impl Tokens {
    /// Parses the lines of a token file; the error says which line is wrong.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut tokens = Self::default();
        let lines = text.lines().map(str::trim).enumerate();
        for (number, line) in lines.filter(|(_, l)| !l.is_empty() && !l.starts_with('#')) {
            let at = |what: &str| format!("line {}: {what}", number + 1);
            if !is_remote(line) {
                if tokens.general.replace(line.to_string()).is_some() {
                    return Err(at(
                        "a second token without a host (`iroh://ID=TOKEN` names one)",
                    ));
                }
                continue;
            }
            match line.split_once('=') {
                Some((host, token)) if !token.trim().is_empty() => tokens
                    .per_host
                    .push((server_of(host), token.trim().to_string())),
                _ => return Err(at("expected `iroh://ID=TOKEN` or `ws://host:port=TOKEN`")),
            }
        }
        if tokens.general.is_none() && tokens.per_host.is_empty() {
            return Err("no token in it".into());
        }
        Ok(tokens)
    }

    /// The token for `host`: the one its line names, else, for Iroh only, the general one.
    #[cfg(any(feature = "remote", test))]
    fn for_host(&self, host: &Host) -> Option<&str> {
        let key = host.key().to_ascii_lowercase();
        let named =
            (self.per_host.iter()).find(|(h, _)| h == &key || h.split('@').next() == Some(&key));
        match (named, host) {
            (Some((_, token)), _) => Some(token),
            (None, Host::Iroh { .. }) => self.general.as_deref(),
            (None, Host::WebSocket(_)) => None,
        }
    }
}

/// The server a token line's host names, as the device list's entries are matched to it:
/// lower case, without a trailing `/` or a device index (a line copied from the device list,
/// `ws://gpu:3000/1=TOKEN`, names the server `ws://gpu:3000`).
fn server_of(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let server = match host.rsplit_once('/') {
        Some((server, index)) if server.contains("://") && index.parse::<usize>().is_ok() => server,
        _ => host,
    };
    server.to_ascii_lowercase()
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

impl Host {
    /// How token lines name the server: `ws://host:port` or `iroh://ID`.
    #[cfg(any(feature = "remote", test))]
    fn key(&self) -> String {
        match self {
            Host::WebSocket(url) => url.clone(),
            Host::Iroh { id, .. } => format!("iroh://{id}"),
        }
    }

    /// How errors name the server.
    #[cfg(feature = "remote")]
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
    let failed = |advice: String, error| Error::Remote {
        entry: entry.to_string(),
        host: remote.host.name(),
        advice,
        error: Box::new(error),
    };
    let mut host = match &remote.host {
        Host::WebSocket(url) => burn::remote::RemoteHost::websocket(url),
        Host::Iroh { id, address } => {
            burn::remote::RemoteHost::iroh(iroh_host(entry, id, address.as_deref())?)
        }
    };
    let tokens = remote_tokens()?;
    if let Some(token) = tokens.for_host(&remote.host) {
        host = host.with_credential(token);
    }
    let withheld = matches!(remote.host, Host::WebSocket(_))
        && tokens.general.is_some()
        && tokens.for_host(&remote.host).is_none();
    Device::remote_options(&host)
        .device_index(remote.index)
        .init()
        .map_err(|e| match withheld {
            // The likely cause, when the server wants a token: say how to send it.
            true => failed(
                format!(
                    " (no token was sent: over plain-text `ws://` only a token line naming the \
                     server, `{}=TOKEN`, is sent)",
                    remote.host.key()
                ),
                e,
            ),
            false => failed(String::new(), e),
        })
}

/// The Iroh server `id`: dialed directly at every address `address` resolves to, relays off;
/// or, without an address, through n0's public relays.
#[cfg(feature = "remote")]
fn iroh_host(entry: &str, id: &str, address: Option<&str>) -> Result<burn::remote::IrohHost> {
    use std::net::ToSocketAddrs;

    use burn::remote::{EndpointId, IrohHost, IrohRelays};

    let unusable = |what: String, error: crate::error::Cause| Error::RemoteAddress {
        entry: entry.to_string(),
        what,
        error,
    };
    let id = (id.parse::<EndpointId>()).map_err(|e| {
        unusable(
            format!("`{id}` is not an Iroh server id"),
            crate::error::Cause::from(e),
        )
    })?;
    let Some(address) = address else {
        return Ok(IrohHost::new(id));
    };
    let addresses = address.to_socket_addrs().map_err(|e| {
        unusable(
            format!("`{address}` does not resolve"),
            crate::error::Cause::from(e),
        )
    })?;
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

    /// The general token goes to Iroh servers only; a `ws://` server gets the token of a line
    /// naming it, and nothing else.
    #[test]
    fn tokens_go_to_the_hosts_named_and_never_unasked_over_websocket() {
        let tokens = Tokens::parse(
            "# tokens\n general-secret \n\niroh://abc/=abc-secret\nws://10.0.0.2:3000/1=ws-secret\n",
        )
        .unwrap();
        let host = |spec: &str| parsed(spec).unwrap().host;
        let cases = [
            ("iroh://abc@10.0.0.2:3000/1", Some("abc-secret")),
            ("iroh://abc/0", Some("abc-secret")),
            ("iroh://other@10.0.0.2:3000", Some("general-secret")),
            ("ws://10.0.0.2:3000/1", Some("ws-secret")),
            ("ws://10.0.0.3:3000/0", None),
        ];
        for (spec, token) in cases {
            assert_eq!(tokens.for_host(&host(spec)), token, "{spec}");
        }
        let general_only = Tokens::parse("secret\n").unwrap();
        assert_eq!(general_only.for_host(&host("ws://gpu:3000")), None);
        assert_eq!(general_only.for_host(&host("iroh://abc")), Some("secret"));
    }

    #[test]
    fn bad_token_files_name_the_line() {
        for (text, expected) in [
            ("a\nb\n", "line 2"),
            ("a\nws://gpu:3000=\n", "line 2"),
            ("iroh://abc\n", "line 1"),
            ("\n# only a comment\n", "no token"),
        ] {
            let err = Tokens::parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
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
