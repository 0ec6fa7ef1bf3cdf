//! towers-models' integration tests, one binary: each file of this folder is a module of it,
//! so the crate and Burn are linked once for all of them.

mod decay_in_update;
mod layers;
mod tf_checkpoint;
mod tf_checkpoint_crafted;
mod tf_weights;
mod torch_checkpoints;
mod torchvision_efficientnet;
mod torchvision_mobilenet;
mod torchvision_mobilenet_v3;
mod torchvision_resnet;
mod torchvision_weights;
