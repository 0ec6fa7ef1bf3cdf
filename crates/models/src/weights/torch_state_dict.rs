//! Where a model's state dict sits in a PyTorch file ([`StateDictPlace`]).
//!
//! `torch.save(model.state_dict())` keys each tensor by its module path, as torchvision's
//! files do. Training scripts save more, and `pytorch-reader` joins the keys of nested
//! dictionaries with dots, so the same tensor can stand under a longer key:
//! - a **training checkpoint** keeps the state dict under an entry, beside the optimizer's,
//!   the epoch and more: `state_dict` (PyTorch's ImageNet example, Lightning, timm),
//!   `model_state_dict` (PyTorch's tutorial "Saving and loading a general checkpoint"),
//!   `model` (torchvision's reference scripts);
//! - a **wrapped model** keys its tensors under the wrapper's attribute: `module.`
//!   (`DataParallel`, `DistributedDataParallel`), `_orig_mod.` (`torch.compile`), `model.`
//!   (a Lightning module's usual attribute).
//!
//! PyTorch users strip these by hand (`consume_prefix_in_state_dict_if_present`, loading
//! `checkpoint["state_dict"]`); here a key is looked for under each of them, the bare key
//! first. The first place that holds one of the model's keys is the file's, and every later
//! key is looked for there alone, so that a file's two state dicts (timm's `state_dict` and
//! `state_dict_ema`) never mix.

/// The entries a training checkpoint keeps its state dict under; `""`: the file is the
/// state dict.
const ENTRIES: [&str; 4] = ["", "state_dict.", "model_state_dict.", "model."];

/// The attributes a wrapper keeps the model under; `""`: not wrapped.
const WRAPPERS: [&str; 4] = ["", "module.", "_orig_mod.", "model."];

/// The prefix of a file's state dict, once one of the model's keys was found under it.
#[derive(Debug, Default)]
pub(crate) struct StateDictPlace {
    prefix: Option<String>,
}

impl StateDictPlace {
    /// The prefixes a key may stand under: the one found, or each entry and wrapper, bare
    /// first.
    fn prefixes(&self) -> Vec<String> {
        if let Some(prefix) = &self.prefix {
            return vec![prefix.clone()];
        }
        let mut prefixes: Vec<String> = Vec::new();
        for entry in ENTRIES {
            for wrapper in WRAPPERS {
                let prefix = format!("{entry}{wrapper}");
                if !prefixes.contains(&prefix) {
                    prefixes.push(prefix);
                }
            }
        }
        prefixes
    }

    /// The prefix under which the file `holds` one of `keys`, and that key's index in `keys`
    /// (the first of `keys` held under the first such prefix); the prefix is the file's from
    /// then on. `None` when the file holds none of them.
    pub(crate) fn find(
        &mut self,
        keys: &[&str],
        holds: impl Fn(&str) -> bool,
    ) -> Option<(String, usize)> {
        let found = self.prefixes().into_iter().find_map(|prefix| {
            let held = keys
                .iter()
                .position(|key| holds(&format!("{prefix}{key}")))?;
            Some((prefix, held))
        })?;
        self.prefix = Some(found.0.clone());
        Some(found)
    }

    /// Where keys are looked for, for a message when none is found.
    pub(crate) fn described() -> String {
        let either = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
            let (last, rest) = names.split_last().expect("names");
            format!("{} or {last}", rest.join(", "))
        };
        format!(
            "the model's keys were looked for bare and under {}, each alone or followed by {}",
            either(&ENTRIES[1..]),
            either(&WRAPPERS[1..])
        )
    }

    /// Whether the file's `key` belongs to the state dict: it stands under the prefix found
    /// (every key does while none was found). The rest of a training checkpoint (the
    /// optimizer's state, a moving average's weights) is not the model's.
    pub(crate) fn covers(&self, key: &str) -> bool {
        self.prefix
            .as_deref()
            .is_none_or(|prefix| key.starts_with(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `file` (its keys) holds `conv1.weight`, and the bare keys a second lookup then
    /// finds in it.
    fn place_of(file: &[&str]) -> (Option<String>, Vec<&'static str>) {
        let mut place = StateDictPlace::default();
        let holds = |key: &str| file.contains(&key);
        let prefix = place.find(&["conv1.weight"], holds).map(|(p, _)| p);
        let found = ["conv1.bias", "fc.bias"]
            .into_iter()
            .filter(|key| place.find(&[key], holds).is_some())
            .collect();
        (prefix, found)
    }

    #[test]
    fn the_state_dict_is_found_under_entries_and_wrappers() {
        let cases = [
            (vec!["conv1.weight", "conv1.bias"], ""),
            (vec!["module.conv1.weight", "module.conv1.bias"], "module."),
            (vec!["_orig_mod.conv1.weight"], "_orig_mod."),
            (
                vec!["state_dict.module.conv1.weight", "epoch"],
                "state_dict.module.",
            ),
            (vec!["model_state_dict.conv1.weight"], "model_state_dict."),
            (vec!["model.conv1.weight", "optimizer.state.0"], "model."),
            (vec!["state_dict.model.conv1.weight"], "state_dict.model."),
        ];
        for (file, prefix) in cases {
            assert_eq!(place_of(&file).0.as_deref(), Some(prefix), "{file:?}");
        }
        assert_eq!(place_of(&["net.conv1.weight"]).0, None);
    }

    #[test]
    fn once_found_the_place_is_the_only_one_looked_in() {
        // timm's training checkpoint: the model's state dict and its moving average's.
        let file = [
            "state_dict.conv1.weight",
            "state_dict_ema.conv1.weight",
            "state_dict_ema.conv1.bias",
            "conv1.bias",
            "state_dict.fc.bias",
        ];
        assert_eq!(
            place_of(&file),
            (Some("state_dict.".to_string()), vec!["fc.bias"])
        );
    }

    #[test]
    fn the_first_key_held_is_the_one_found() {
        let mut place = StateDictPlace::default();
        let file = ["module.b", "module.c"];
        let found = place.find(&["a", "c", "b"], |key| file.contains(&key));
        assert_eq!(found, Some(("module.".to_string(), 1)));
    }

    #[test]
    fn the_places_are_described_for_a_message() {
        assert_eq!(
            StateDictPlace::described(),
            "the model's keys were looked for bare and under `state_dict.`, \
             `model_state_dict.` or `model.`, each alone or followed by `module.`, \
             `_orig_mod.` or `model.`"
        );
    }

    #[test]
    fn the_rest_of_a_checkpoint_is_not_the_models() {
        let mut place = StateDictPlace::default();
        assert!(place.covers("optimizer.state.0.momentum_buffer"));
        place.find(&["conv1.weight"], |key| key == "model.conv1.weight");
        assert!(place.covers("model.fc.weight"));
        assert!(!place.covers("optimizer.state.0.momentum_buffer"));
        assert!(!place.covers("model_ema.fc.weight"));
    }
}
