//! Config files, JSON and TOML, laid over a preset; what parses and validates round-trips.

use burn_towers::train::TrainConfig;
use proptest::prelude::*;

use crate::fuzz;
use crate::mutate::mutated;

fn seeds() -> Vec<Vec<u8>> {
    let preset = TrainConfig::inception();
    vec![
        toml::to_string(&preset).unwrap().into_bytes(),
        serde_json::to_vec_pretty(&TrainConfig::cifar10()).unwrap(),
        b"batch_size = 64\ndevices = \"flex,flex\"\n[optimizer]\nkind = \"momentum\"\nmomentum = 0.9\n[towers]\naccumulation = 2\n".to_vec(),
        br#"{"learning_rate": {"kind": "piecewise_constant", "boundaries": [10], "values": [0.1, 0.01]}}"#.to_vec(),
    ]
}

#[test]
fn fuzz_config_files() {
    fuzz(
        "config",
        (mutated(seeds()), any::<bool>()),
        |(bytes, json)| {
            let text = String::from_utf8_lossy(&bytes);
            let Ok(config) = TrainConfig::cifar10().merge_text(&text, json) else {
                return false;
            };
            let _ = config.validate();
            let back = TrainConfig::inception()
                .merge_text(&toml::to_string(&config).unwrap(), false)
                .unwrap();
            assert_eq!(back, config);
            true
        },
    );
}
