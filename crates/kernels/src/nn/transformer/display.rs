//! [`displayed_as_burns`]: Burn's display of a transformer stack (its settings on one line),
//! for the encoder and the decoder, whose settings are the same fields.

/// Implements `ModuleDisplay` for `$stack`, a struct with Burn's transformer settings
/// (`d_model`, `d_ff`, `n_heads`, `n_layers`, `dropout`, `norm_first`, `quiet_softmax`), as
/// Burn's `TransformerEncoder` and `TransformerDecoder` display them.
macro_rules! displayed_as_burns {
    ($stack:ty) => {
        impl burn::module::ModuleDisplay for $stack {
            fn custom_settings(&self) -> Option<burn::module::DisplaySettings> {
                burn::module::DisplaySettings::new()
                    .with_new_line_after_attribute(false)
                    .optional()
            }

            fn custom_content(
                &self,
                content: burn::module::Content,
            ) -> Option<burn::module::Content> {
                content
                    .add("d_model", &self.d_model)
                    .add("d_ff", &self.d_ff)
                    .add("n_heads", &self.n_heads)
                    .add("n_layers", &self.n_layers)
                    .add("dropout", &self.dropout)
                    .add("norm_first", &self.norm_first)
                    .add("quiet_softmax", &self.quiet_softmax)
                    .optional()
            }
        }
    };
}

pub(super) use displayed_as_burns;
