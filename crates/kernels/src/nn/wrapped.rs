//! [`wrapped_module!`]: Burn's `Module` for a drop-in layer that holds Burn's own layer, every
//! call handed to it.

/// Implements Burn's `Module`, `ModuleDisplay` and `Display` for `$layer`, a struct whose one field
/// `inner` holds Burn's layer of the same name, by handing every call to `inner`: the same
/// parameters visited under the same names, so a record saved from either type loads into the
/// other and optimizers, forks and device moves see Burn's layer. Also `Deref` to it (its
/// public fields read as on Burn's layer) and `From` both ways.
///
/// A macro rather than a derive: `#[derive(Module)]` on the wrapper would visit the parameters
/// under `inner.`, a different record layout.
macro_rules! wrapped_module {
    ($layer:ident, $inner:ty) => {
        impl burn::module::Module for $layer {
            fn collect_devices(&self, devices: burn::module::Devices) -> burn::module::Devices {
                self.inner.collect_devices(devices)
            }

            fn fork(self, device: &burn::tensor::Device) -> Self {
                Self::from(self.inner.fork(device))
            }

            fn to_device(self, device: &burn::tensor::Device) -> Self {
                Self::from(self.inner.to_device(device))
            }

            fn train(self) -> Self {
                Self::from(self.inner.train())
            }

            fn valid(&self) -> Self {
                Self::from(self.inner.valid())
            }

            fn materialize(self) -> Self {
                Self::from(self.inner.materialize())
            }

            fn visit<Visitor: burn::module::ModuleVisitor>(&self, visitor: &mut Visitor) {
                self.inner.visit(visitor)
            }

            fn map<Mapper: burn::module::ModuleMapper>(self, mapper: &mut Mapper) -> Self {
                Self::from(self.inner.map(mapper))
            }
        }

        impl burn::module::ModuleDisplayDefault for $layer {
            fn content(&self, content: burn::module::Content) -> Option<burn::module::Content> {
                burn::module::ModuleDisplayDefault::content(&self.inner, content)
            }

            fn num_params(&self) -> usize {
                burn::module::ModuleDisplayDefault::num_params(&self.inner)
            }
        }

        impl burn::module::ModuleDisplay for $layer {
            fn format(&self, settings: burn::module::DisplaySettings) -> String {
                burn::module::ModuleDisplay::format(&self.inner, settings)
            }
        }

        impl std::fmt::Display for $layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.inner, f)
            }
        }

        impl std::ops::Deref for $layer {
            type Target = $inner;

            fn deref(&self) -> &$inner {
                &self.inner
            }
        }

        impl std::ops::DerefMut for $layer {
            fn deref_mut(&mut self) -> &mut $inner {
                &mut self.inner
            }
        }

        impl From<$inner> for $layer {
            fn from(inner: $inner) -> Self {
                Self { inner }
            }
        }

        impl From<$layer> for $inner {
            fn from(layer: $layer) -> Self {
                layer.inner
            }
        }
    };
}

pub(crate) use wrapped_module;
