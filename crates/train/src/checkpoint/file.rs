//! One checkpoint file: the model, the optimizer state, the moving averages, the step and the
//! input position, written atomically and checksummed.
//!
//! Layout: the 8 bytes `BTOWCKP2`, a little-endian `u64` header length, a JSON header
//! (`step`, the sections' names and lengths, the run's configuration), the sections back to
//! back (`model` and `averages` are [`ModuleRecord`]s in Burn's burnpack format, keyed by
//! module path and carrying the parameter ids the optimizer state is keyed by; `optimizer` is an
//! [`OptimizerRecord`]; the optional `input` is the input source's position as JSON, e.g. a
//! [`towers_data::InputPosition`]), and last the
//! little-endian CRC32C of every byte before it.
//!
//! The checksum is CRC32C (the `crc32c` crate, already used for TFRecords, hardware-accelerated
//! at several GB/s): it guards against accidents (bit rot, a torn copy, a truncated file), not
//! against tampering, which would need a keyed hash. Any change of up to 32 consecutive bits is
//! always caught, other damage but for a 2^-32 chance.

use std::io::Write;
use std::path::Path;

use burn::optim::OptimizerRecord;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use towers_data::atomic_file::write_atomic;
use towers_multigpu::LossScaleState;

/// The format's magic (a first format, `BTOWCKPT` without the checksum, was never released).
pub(crate) const MAGIC: &[u8; 8] = b"BTOWCKP2";
/// Magic and header length.
const PREAMBLE: usize = 16;
/// The CRC32C trailer.
const TRAILER: usize = 4;

/// Everything a run needs to continue where it stopped.
#[derive(Debug)]
pub struct Checkpoint {
    /// Updates applied.
    pub step: u64,
    /// The model's parameters (and batch-norm statistics).
    pub model: ModuleRecord,
    /// The optimizer's per-parameter state.
    pub optimizer: OptimizerRecord,
    /// The moving averages of the weights, when the run keeps them.
    pub averages: Option<ModuleRecord>,
    /// Where the training input stands after the step's batches, as the input source wrote
    /// it (the trainer keeps every rank's [`crate::BatchSource::position`] there); `None`
    /// when the writer kept none, which the trainer cannot resume.
    pub input: Option<serde_json::Value>,
    /// The run's configuration, for the record (not applied on load).
    pub config: serde_json::Value,
    /// Where f16 loss scaling stood, when the run scales its losses; `None` otherwise, and in
    /// checkpoints written before it was kept (a resume then starts at the initial scale).
    pub loss_scale: Option<LossScaleState>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    step: u64,
    sections: Vec<Section>,
    config: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    loss_scale: Option<LossScaleState>,
}

#[derive(Serialize, Deserialize)]
struct Section {
    name: String,
    bytes: u64,
}

impl Checkpoint {
    /// Writes the checkpoint to `path` atomically: a crash leaves either the old file or the
    /// new one, never part of one.
    pub fn save(self, path: &Path) -> Result<()> {
        let bad = |e: burn::store::RecordError| Error::Checkpoint {
            path: path.to_path_buf(),
            reason: "cannot encode a section".into(),
            error: Some(Box::new(e)),
        };
        let mut sections = vec![
            ("model", self.model.into_bytes().map_err(bad)?),
            ("optimizer", self.optimizer.into_bytes().map_err(bad)?),
        ];
        if let Some(averages) = self.averages {
            sections.push(("averages", averages.into_bytes().map_err(bad)?));
        }
        if let Some(input) = &self.input {
            let json = serde_json::to_vec(input).expect("a position always serializes");
            sections.push(("input", Bytes::from_bytes_vec(json)));
        }
        let header = Header {
            step: self.step,
            sections: sections
                .iter()
                .map(|(name, bytes)| Section {
                    name: name.to_string(),
                    bytes: bytes.len() as u64,
                })
                .collect(),
            config: self.config,
            loss_scale: self.loss_scale,
        };
        let header = serde_json::to_vec(&header).expect("a header always serializes");
        let header_len = (header.len() as u64).to_le_bytes();
        let mut parts: Vec<&[u8]> = vec![MAGIC, &header_len, &header];
        parts.extend(sections.iter().map(|(_, bytes)| &bytes[..]));
        let crc = parts
            .iter()
            .fold(0, |crc, part| crc32c::crc32c_append(crc, part));
        write_atomic(path, |w| {
            for part in &parts {
                w.write_all(part)?;
            }
            w.write_all(&crc.to_le_bytes())
        })
        .map_err(Error::io(path))
    }

    /// Reads a checkpoint written by [`save`](Self::save), checking its checksum.
    pub fn load(path: &Path) -> Result<Self> {
        let data = std::fs::read(path).map_err(Error::io(path))?;
        Self::from_bytes(&data, path)
    }

    /// Parses the bytes of a checkpoint file; `path` names it in errors. A file that is not
    /// a checkpoint, is truncated, fails its checksum or holds an unreadable section is an
    /// [`Error::Checkpoint`] naming the file; nothing is allocated beyond the input's size.
    pub fn from_bytes(data: &[u8], path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::Checkpoint {
            path: path.to_path_buf(),
            reason,
            error: None,
        };
        let body = match data.get(..8) {
            Some(magic) if magic == MAGIC => verified_body(data).map_err(bad)?,
            _ => return Err(bad("not a burn-towers checkpoint".into())),
        };
        let Some(len_bytes) = body.get(8..PREAMBLE) else {
            return Err(bad("truncated header".into()));
        };
        let header_len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        let header_end = usize::try_from(header_len)
            .ok()
            .and_then(|len| PREAMBLE.checked_add(len))
            .filter(|&end| end <= body.len())
            .ok_or_else(|| bad("truncated header".into()))?;
        let header: Header = serde_json::from_slice(&body[PREAMBLE..header_end])
            .map_err(|e| bad(format!("unreadable header: {e}")))?;
        let available = (body.len() - header_end) as u64;
        let listed = header
            .sections
            .iter()
            .try_fold(0u64, |sum, s| sum.checked_add(s.bytes));
        if listed != Some(available) {
            return Err(bad(format!(
                "{available} bytes of sections, the header lists {}: truncated or corrupt",
                listed.map_or("more than 2^64".into(), |n| n.to_string())
            )));
        }
        let mut offset = header_end;
        let mut model = None;
        let mut optimizer = None;
        let mut averages = None;
        let mut input = None;
        for section in &header.sections {
            let end = offset + section.bytes as usize;
            let bytes = Bytes::from_bytes_vec(body[offset..end].to_vec());
            offset = end;
            let broken =
                |e: burn::store::RecordError| bad(format!("section {}: {e}", section.name));
            match section.name.as_str() {
                "model" => model = Some(ModuleRecord::from_bytes(bytes).map_err(broken)?),
                "optimizer" => {
                    optimizer = Some(OptimizerRecord::from_bytes(bytes).map_err(broken)?)
                }
                "averages" => averages = Some(ModuleRecord::from_bytes(bytes).map_err(broken)?),
                "input" => {
                    input = Some(serde_json::from_slice(&bytes).map_err(|e| {
                        bad(format!("section input: unreadable input position: {e}"))
                    })?)
                }
                other => return Err(bad(format!("unknown section `{other}`"))),
            }
        }
        let checkpoint = Self {
            step: header.step,
            model: model.ok_or_else(|| bad("no model section".into()))?,
            optimizer: optimizer.ok_or_else(|| bad("no optimizer section".into()))?,
            averages,
            input,
            config: header.config,
            loss_scale: header.loss_scale,
        };
        Ok(checkpoint)
    }
}

/// The bytes before the CRC32C trailer, if it matches them.
fn verified_body(data: &[u8]) -> std::result::Result<&[u8], String> {
    let Some(split) = data.len().checked_sub(TRAILER).filter(|&n| n >= PREAMBLE) else {
        return Err("truncated: too short for a checkpoint".into());
    };
    let (body, trailer) = data.split_at(split);
    let stored = u32::from_le_bytes(trailer.try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(body);
    if stored != actual {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, content {actual:08x}): the file is \
             corrupt or truncated"
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::optim::OptimizerConfig;
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, ModuleOptimizer};
    use burn::tensor::{Device, Tensor, TensorData};

    fn values(model: &Linear) -> Vec<f32> {
        let mut v: Vec<f32> = model.weight.val().into_data().try_to_vec().unwrap();
        v.extend(
            model
                .bias
                .as_ref()
                .unwrap()
                .val()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap(),
        );
        v
    }

    /// One RMSProp step on a fixed input whose gradient depends on `scale`.
    fn step(model: Linear, optim: &mut ModuleOptimizer, scale: f32) -> Linear {
        let device = model.weight.val().device();
        let x = TensorData::new((0..8).map(|i| i as f32 * scale - 1.0).collect(), [2, 4]);
        let loss = model
            .forward(Tensor::<2>::from_data(x, &device))
            .powi_scalar(2)
            .mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        optim.step(0.05, model, grads)
    }

    /// Save after two steps, load into a differently initialized model and a fresh optimizer:
    /// identical weights, and the next step identical too (so the optimizer state came back).
    #[test]
    fn round_trip_restores_weights_and_optimizer_state() {
        let device = Device::flex().autodiff();
        let config = OptimizerConfig::inception_rmsprop();
        let mut optim = config.init();
        let mut model = LinearConfig::new(4, 3).init(&device);
        model = step(model, &mut optim, 1.0);
        model = step(model, &mut optim, -0.5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ckpt-2");
        Checkpoint {
            step: 2,
            model: model.clone().into_record(),
            optimizer: optim.to_record(),
            averages: None,
            input: None,
            config: serde_json::Value::Null,
            loss_scale: None,
        }
        .save(&path)
        .unwrap();

        let ckpt = Checkpoint::load(&path).unwrap();
        let fresh = LinearConfig::new(4, 3).init(&device);
        assert_ne!(values(&fresh), values(&model));
        let restored = fresh.load_record(ckpt.model);
        assert_eq!(values(&restored), values(&model), "identical weights");
        let mut restored_optim = config.init().load_record(ckpt.optimizer);

        let next = step(model, &mut optim, 0.25);
        let restored_next = step(restored, &mut restored_optim, 0.25);
        assert_eq!(
            values(&restored_next),
            values(&next),
            "identical optimizer state"
        );
        // Without the state, RMSProp's next step differs.
        let mut stateless = config.init();
        let ckpt = Checkpoint::load(&path).unwrap();
        let cold = step(
            LinearConfig::new(4, 3)
                .init(&device)
                .load_record(ckpt.model),
            &mut stateless,
            0.25,
        );
        assert_ne!(values(&cold), values(&next));
    }

    #[test]
    fn truncated_and_foreign_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let model = LinearConfig::new(3, 2).init(&Device::flex());
        let path = dir.path().join("model.ckpt-5");
        Checkpoint {
            step: 5,
            model: model.clone().into_record(),
            optimizer: burn::optim::SgdConfig::new().init().to_record(),
            averages: Some(model.into_record()),
            input: None,
            config: serde_json::json!({"seed": 1}),
            loss_scale: None,
        }
        .save(&path)
        .unwrap();
        let back = Checkpoint::load(&path).unwrap();
        assert_eq!((back.step, back.config["seed"].as_u64()), (5, Some(1)));
        assert!(back.averages.is_some());

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let msg = report(&Checkpoint::load(&path).unwrap_err());
        assert_error_names(&msg, &["model.ckpt-5", "truncated"]);

        std::fs::write(&path, b"something else entirely").unwrap();
        let msg = report(&Checkpoint::load(&path).unwrap_err());
        assert_error_names(&msg, &["not a burn-towers checkpoint"]);
    }

    fn small(step: u64) -> Checkpoint {
        let model = LinearConfig::new(3, 2).init(&Device::flex());
        Checkpoint {
            step,
            model: model.clone().into_record(),
            optimizer: burn::optim::SgdConfig::new().init().to_record(),
            averages: Some(model.into_record()),
            input: None,
            config: serde_json::json!({"seed": 1}),
            loss_scale: None,
        }
    }

    /// The input position comes back as saved; a checkpoint saved without one has none.
    #[test]
    fn the_input_position_round_trips_and_is_optional() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ckpt-9");
        let mut position = towers_data::InputPosition::start(vec!["a/x".into()], 4);
        position.next.seq = 1 << 40;
        position.shuffle = Some(towers_data::ShuffleRng {
            seed: 4,
            words: 1 << 50,
        });
        Checkpoint {
            input: Some(serde_json::to_value(&position).unwrap()),
            ..small(9)
        }
        .save(&path)
        .unwrap();
        let loaded = Checkpoint::load(&path).unwrap().input.unwrap();
        let loaded: towers_data::InputPosition = serde_json::from_value(loaded).unwrap();
        assert_eq!(loaded, position);
        small(9).save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap().input, None);
    }

    /// The loss scale comes back as saved; a checkpoint saved without one (as every checkpoint
    /// before it was kept) loads with none, and its header does not mention it.
    #[test]
    fn the_loss_scale_round_trips_and_is_optional() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ckpt-9");
        let state: LossScaleState =
            serde_json::from_value(serde_json::json!({"scale": 4096.0, "good_updates": 17}))
                .unwrap();
        Checkpoint {
            loss_scale: Some(state),
            ..small(9)
        }
        .save(&path)
        .unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap().loss_scale, Some(state));
        small(9).save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("loss_scale"));
        assert_eq!(Checkpoint::load(&path).unwrap().loss_scale, None);
    }

    /// One flipped bit anywhere, header and magic included, or any truncation, is an error
    /// naming the file; the intact file loads.
    #[test]
    fn every_flipped_bit_and_every_truncation_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ckpt-7");
        small(7).save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        Checkpoint::from_bytes(&bytes, &path).unwrap();
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1 << (i % 8);
            let msg = Checkpoint::from_bytes(&flipped, &path)
                .unwrap_err()
                .to_string();
            assert!(msg.contains("model.ckpt-7"), "byte {i}: {msg}");
            if i >= 8 {
                assert!(msg.contains("checksum mismatch"), "byte {i}: {msg}");
            }
        }
        for len in 0..bytes.len() {
            let msg = Checkpoint::from_bytes(&bytes[..len], &path)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("model.ckpt-7") && msg.contains("truncated")
                    || len < 8 && msg.contains("not a burn-towers checkpoint"),
                "{len} bytes: {msg}"
            );
        }
    }

    /// Lengths in a header are checked against the file before anything is allocated or
    /// added up: 2^60-byte sections, and two whose sum overflows 64 bits, are errors.
    #[test]
    fn huge_lengths_in_a_header_are_errors() {
        let path = Path::new("model.ckpt-1");
        for sizes in [vec![1u64 << 60], vec![1 << 63, 1 << 63]] {
            let sections: Vec<_> = sizes
                .iter()
                .map(|&bytes| serde_json::json!({"name": "model", "bytes": bytes}))
                .collect();
            let header = serde_json::json!({"step": 1, "sections": sections, "config": null});
            let header = serde_json::to_vec(&header).unwrap();
            let mut file = MAGIC.to_vec();
            file.extend_from_slice(&(header.len() as u64).to_le_bytes());
            file.extend_from_slice(&header);
            file.extend_from_slice(b"a few bytes of section");
            let crc = crc32c::crc32c(&file);
            file.extend_from_slice(&crc.to_le_bytes());
            let msg = report(&Checkpoint::from_bytes(&file, path).unwrap_err());
            assert!(msg.contains("truncated or corrupt"), "{sizes:?}: {msg}");
        }
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&(1u64 << 60).to_le_bytes());
        file.extend_from_slice(b"{}");
        let crc = crc32c::crc32c(&file);
        file.extend_from_slice(&crc.to_le_bytes());
        let msg = report(&Checkpoint::from_bytes(&file, path).unwrap_err());
        assert_error_names(&msg, &["truncated header"]);
    }

    #[test]
    fn saving_into_a_missing_directory_is_an_error_naming_it() {
        let model = LinearConfig::new(3, 2).init(&Device::flex());
        let err = Checkpoint {
            step: 1,
            model: model.into_record(),
            optimizer: burn::optim::SgdConfig::new().init().to_record(),
            averages: None,
            input: None,
            config: serde_json::Value::Null,
            loss_scale: None,
        }
        .save(Path::new("/no/such/dir/model.ckpt-1"))
        .unwrap_err();
        assert_error_names(&report(&err), &["/no/such/dir"]);
    }
}
