//! TF2's object-based checkpoints (`tf.train.Checkpoint(model=...).save`, and the `variables/`
//! of a SavedModel: `tf.saved_model.save`, tf-keras's `model.save("dir")`, Keras 3's
//! `model.export`) key each variable by a path through the Python objects that held it
//! (`model/_operations/1/_kernel/.ATTRIBUTES/VARIABLE_VALUE`), which names no parameter. Their
//! object graph (the `_CHECKPOINTABLE_OBJECT_GRAPH` tensor) records each variable's own name
//! as well, the one it was created with (`Conv1/kernel`, `sequential/dense/bias`): what a TF 1
//! saver would have keyed it by, and what the checkpoint readers list it by.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;

use super::tf_proto::TrackableObjectGraph;

/// The tensor that holds the object graph.
pub(super) const OBJECT_GRAPH_KEY: &str = "_CHECKPOINTABLE_OBJECT_GRAPH";

/// What a saved tensor is to its object when it is a variable's value.
const VARIABLE_VALUE: &str = "VARIABLE_VALUE";

/// Each variable's own name and its keys, from the object graph's serialized bytes, for the
/// keys `fingerprint` knows (what tells tensors' values apart: their type, shape, size and
/// checksum). A name has several keys where variables of one value share it (Keras 3's
/// `model.export` saves each variable twice, under `variables/` and `_all_variables/`): the
/// first is read. Left out: variables without a name, and names that variables of different
/// values share or that are another tensor's key, which would be ambiguous. Error: the bytes
/// are not an object graph.
pub(super) fn variable_names<F: Eq>(
    object_graph: &[u8],
    fingerprint: impl Fn(&str) -> Option<F>,
) -> Result<BTreeMap<String, Vec<String>>, prost::DecodeError> {
    let graph = TrackableObjectGraph::decode(object_graph)?;
    let variables = (graph.nodes.into_iter())
        .flat_map(|node| node.attributes)
        .filter(|tensor| tensor.name == VARIABLE_VALUE && !tensor.full_name.is_empty())
        .filter_map(|tensor| {
            let value = fingerprint(&tensor.checkpoint_key)?;
            Some((tensor.full_name, tensor.checkpoint_key, value))
        });
    let mut names: BTreeMap<String, (Vec<String>, F)> = BTreeMap::new();
    let mut ambiguous = BTreeSet::new();
    for (name, key, value) in variables {
        if fingerprint(&name).is_some() && name != key {
            ambiguous.insert(name.clone());
        }
        match names.get_mut(&name) {
            Some((keys, first)) if *first == value => keys.push(key),
            Some(_) => {
                ambiguous.insert(name);
            }
            None => {
                names.insert(name, (vec![key], value));
            }
        }
    }
    names.retain(|name, _| !ambiguous.contains(name));
    Ok(names
        .into_iter()
        .map(|(name, (keys, _))| (name, keys))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::tf_proto::{SerializedTensor, TrackableObject};

    fn graph(tensors: &[(&str, &str, &str)]) -> Vec<u8> {
        let attributes = (tensors.iter())
            .map(|&(name, full_name, checkpoint_key)| SerializedTensor {
                name: name.into(),
                full_name: full_name.into(),
                checkpoint_key: checkpoint_key.into(),
            })
            .collect();
        let nodes = vec![TrackableObject { attributes }];
        TrackableObjectGraph { nodes }.encode_to_vec()
    }

    /// Variables are named by their own names, a name two variables of one value share by
    /// both keys; a name two variables of different values share, a name that is another
    /// tensor's key, a tensor that is not a variable's value, a variable without a name and a
    /// key the checkpoint lacks are not.
    #[test]
    fn variables_are_named_by_the_names_they_were_created_with_unless_ambiguous() {
        // Each key and its value's fingerprint.
        let keys = [
            ("k/0", 0),
            ("k/1", 1),
            ("k/2", 2),
            ("k/3", 3),
            ("k/4", 4),
            ("k/5", 5),
            ("k/7", 7),
            ("k/8", 7),
            ("taken", 9),
        ];
        let fingerprint = |key: &str| keys.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let bytes = graph(&[
            ("VARIABLE_VALUE", "conv/kernel", "k/0"),
            ("VARIABLE_VALUE", "twice", "k/1"),
            ("VARIABLE_VALUE", "twice", "k/2"),
            ("VARIABLE_VALUE", "taken", "k/3"),
            ("OTHER", "not/a/value", "k/4"),
            ("VARIABLE_VALUE", "", "k/5"),
            ("VARIABLE_VALUE", "gone", "k/6"),
            ("VARIABLE_VALUE", "exported", "k/7"),
            ("VARIABLE_VALUE", "exported", "k/8"),
        ]);
        let names = variable_names(&bytes, fingerprint).unwrap();
        let keys = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let expected = BTreeMap::from([
            ("conv/kernel".to_string(), keys(&["k/0"])),
            ("exported".to_string(), keys(&["k/7", "k/8"])),
        ]);
        assert_eq!(names, expected);
        assert!(variable_names(b"\xff\xff", |_| Some(0)).is_err());
    }
}
