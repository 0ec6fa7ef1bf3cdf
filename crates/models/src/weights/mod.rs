//! Weights in and out of our models: TensorFlow V2 and V1 checkpoints ([`TfCheckpoint`], a
//! reader independent of any model: partitioned variables read whole, TF2 object-based
//! checkpoints and SavedModels by their variables' own names), the TF names of our models'
//! parameters ([`TfNamed`]), torchvision's `.pth` state dicts and PyTorch training checkpoints
//! holding one ([`TorchSource`], names by [`TorchNamed`]: Inception v3's, ResNet's,
//! MobileNetV2's and EfficientNet's), keras.applications' Inception v3, ResNets, MobileNetV2
//! and EfficientNets in Keras's files and in TF2's of a Keras model ([`KerasSource`], by the TF
//! names of their layers: TF-slim's for Inception v3, Keras's for the others), safetensors
//! export and import, and [`restore`], which fills a model from any [`WeightSource`] and
//! reports what was restored, skipped, missing and unused.

mod by_path;
mod byte_values;
mod efficientnet_keras_names;
mod efficientnet_torch_names;
mod error;
mod keras_config;
mod keras_file;
mod keras_metadata;
mod keras_source;
mod mobilenet_keras_names;
mod mobilenet_torch_names;
mod mobilenet_v3_keras_names;
mod mobilenet_v3_torch_names;
mod resnet_keras_names;
mod resnet_torch_names;
mod restore;
mod safetensors;
mod table;
mod tensor_slices;
mod tf_checkpoint;
mod tf_checkpoint_v1;
mod tf_names;
mod tf_object_names;
mod tf_proto;
mod tf_source;
mod torch_names;
mod torch_source;
mod torch_state_dict;
mod torch_zip_copy;

pub use by_path::ByPath;
pub use error::{Result, WeightsError};
pub use keras_config::KerasConfig;
pub use keras_source::KerasSource;
pub use restore::{RestoreOptions, RestoreReport, SourceTensor, WeightSource, in_scope, restore};
pub use safetensors::{open_safetensors, read_safetensors, safetensors_from_bytes, to_safetensors};
pub use tf_checkpoint::{
    TensorInfo, TfCheckpoint, TfDType, TfValues, is_v1_checkpoint, prefix_from_state,
};
pub use tf_source::{MOVING_AVERAGE_SUFFIX, TfLayout, TfNamed, TfSource, TfVariable};
pub use torch_names::{TorchLayout, TorchNamed, TorchParameter, torch_parameter_in};
pub use torch_source::TorchSource;
