//! towers-data's integration tests, one binary: each file of this folder is a module of it,
//! so the crate and Burn are linked once for all of them.

mod builtin_learnable;
mod cifar100;
mod cifar10_python;
mod corrupt_records;
mod dataset_pipeline;
mod hard_exit;
mod image_folder;
mod inception_pipeline;
mod layers;
mod load;
mod pipeline;
mod record_dataset;
mod recut;
mod resume;
mod tf_compressed;
mod tf_jpeg;
mod tfds;
mod torchvision_preprocessing;
