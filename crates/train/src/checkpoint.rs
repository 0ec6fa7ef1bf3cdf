//! One checkpoint file: the model, the optimizer state, the moving averages and the step,
//! written atomically.
//!
//! Layout: the 8 bytes `BTOWCKPT`, a little-endian `u64` header length, a JSON header
//! (`step`, the sections' names and lengths, the run's configuration), then the sections back
//! to back, each in Burn's burnpack format: `model` and `averages` are [`ModuleRecord`]s
//! (keyed by module path, and carrying the parameter ids the optimizer state is keyed by),
//! `optimizer` is an [`OptimizerRecord`].

use std::io::Write;
use std::path::Path;

use burn::optim::OptimizerRecord;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use towers_data::atomic_file::write_atomic;

pub(crate) const MAGIC: &[u8; 8] = b"BTOWCKPT";

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
    /// The run's configuration, for the record (not applied on load).
    pub config: serde_json::Value,
}

#[derive(Serialize, Deserialize)]
struct Header {
    step: u64,
    sections: Vec<Section>,
    config: serde_json::Value,
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
            reason: e.to_string(),
        };
        let mut sections = vec![
            ("model", self.model.into_bytes().map_err(bad)?),
            ("optimizer", self.optimizer.into_bytes().map_err(bad)?),
        ];
        if let Some(averages) = self.averages {
            sections.push(("averages", averages.into_bytes().map_err(bad)?));
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
        };
        let header = serde_json::to_vec(&header).expect("a header always serializes");
        write_atomic(path, |w| {
            w.write_all(MAGIC)?;
            w.write_all(&(header.len() as u64).to_le_bytes())?;
            w.write_all(&header)?;
            for (_, bytes) in &sections {
                w.write_all(bytes)?;
            }
            Ok(())
        })
        .map_err(Error::io(path))
    }

    /// Reads a checkpoint written by [`save`](Self::save).
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::Checkpoint {
            path: path.to_path_buf(),
            reason,
        };
        let data = std::fs::read(path).map_err(Error::io(path))?;
        if data.len() < 16 || &data[..8] != MAGIC {
            return Err(bad("not a burn-towers checkpoint".into()));
        }
        let header_len = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")) as usize;
        let header_end = 16usize
            .checked_add(header_len)
            .filter(|&end| end <= data.len())
            .ok_or_else(|| bad("truncated header".into()))?;
        let header: Header = serde_json::from_slice(&data[16..header_end])
            .map_err(|e| bad(format!("unreadable header: {e}")))?;
        let total: u64 = header.sections.iter().map(|s| s.bytes).sum();
        if (data.len() - header_end) as u64 != total {
            return Err(bad(format!(
                "{} bytes of sections, the header lists {total}: truncated or corrupt",
                data.len() - header_end
            )));
        }
        let mut offset = header_end;
        let mut model = None;
        let mut optimizer = None;
        let mut averages = None;
        for section in &header.sections {
            let end = offset + section.bytes as usize;
            let bytes = Bytes::from_bytes_vec(data[offset..end].to_vec());
            offset = end;
            let broken =
                |e: burn::store::RecordError| bad(format!("section {}: {e}", section.name));
            match section.name.as_str() {
                "model" => model = Some(ModuleRecord::from_bytes(bytes).map_err(broken)?),
                "optimizer" => {
                    optimizer = Some(OptimizerRecord::from_bytes(bytes).map_err(broken)?)
                }
                "averages" => averages = Some(ModuleRecord::from_bytes(bytes).map_err(broken)?),
                other => return Err(bad(format!("unknown section `{other}`"))),
            }
        }
        Ok(Self {
            step: header.step,
            model: model.ok_or_else(|| bad("no model section".into()))?,
            optimizer: optimizer.ok_or_else(|| bad("no optimizer section".into()))?,
            averages,
            config: header.config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::OptimizerConfig;
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
            config: serde_json::Value::Null,
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
            config: serde_json::json!({"seed": 1}),
        }
        .save(&path)
        .unwrap();
        let back = Checkpoint::load(&path).unwrap();
        assert_eq!((back.step, back.config["seed"].as_u64()), (5, Some(1)));
        assert!(back.averages.is_some());

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let msg = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(
            msg.contains("model.ckpt-5") && msg.contains("truncated"),
            "{msg}"
        );

        std::fs::write(&path, b"something else entirely").unwrap();
        let msg = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(msg.contains("not a burn-towers checkpoint"), "{msg}");
    }

    #[test]
    fn saving_into_a_missing_directory_is_an_error_naming_it() {
        let model = LinearConfig::new(3, 2).init(&Device::flex());
        let err = Checkpoint {
            step: 1,
            model: model.into_record(),
            optimizer: burn::optim::SgdConfig::new().init().to_record(),
            averages: None,
            config: serde_json::Value::Null,
        }
        .save(Path::new("/no/such/dir/model.ckpt-1"))
        .unwrap_err();
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
    }
}
