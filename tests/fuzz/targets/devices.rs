//! Device lists as given on the command line.

use burn_towers::multigpu::parse_devices;

use crate::fuzz;
use crate::mutate::mutated;

#[test]
fn fuzz_device_lists() {
    let seeds = [
        "flex",
        "flex,flex",
        "flex*3,ndarray",
        "cuda:0,cuda:1",
        "cuda:0*3,cuda:1",
        "wgpu:0,cuda:0",
        "ws://127.0.0.1:3000/0,flex",
        "iroh://abc@127.0.0.1:3000/0,flex",
    ];
    let seeds = seeds.iter().map(|s| s.as_bytes().to_vec()).collect();
    fuzz("device lists", mutated(seeds), |bytes| {
        let list = String::from_utf8_lossy(&bytes);
        // With the remote backend built in, a well-formed remote entry dials its server (and
        // waits out Burn's retries): such lists test the network, not the parser.
        let lower = list.to_ascii_lowercase();
        if cfg!(feature = "remote") && (lower.contains("ws:") || lower.contains("iroh:")) {
            return false;
        }
        parse_devices(&list).is_ok()
    });
}
