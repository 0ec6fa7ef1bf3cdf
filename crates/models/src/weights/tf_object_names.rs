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

/// Each variable's own name and its key, from the object graph's serialized bytes, for the
/// keys `is_key` says the checkpoint has. Left out: variables without a name, and names that
/// two variables share or that are another tensor's key, which would be ambiguous. Error: the
/// bytes are not an object graph.
pub(super) fn variable_names(
    object_graph: &[u8],
    is_key: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, String>, prost::DecodeError> {
    let graph = TrackableObjectGraph::decode(object_graph)?;
    let variables = (graph.nodes.into_iter())
        .flat_map(|node| node.attributes)
        .filter(|tensor| {
            tensor.name == VARIABLE_VALUE
                && !tensor.full_name.is_empty()
                && is_key(&tensor.checkpoint_key)
        })
        .map(|tensor| (tensor.full_name, tensor.checkpoint_key));
    let mut names = BTreeMap::new();
    let mut ambiguous = BTreeSet::new();
    for (name, key) in variables {
        let another_tensors_key = is_key(&name) && name != key;
        let named_before = names.insert(name.clone(), key).is_some();
        if another_tensors_key || named_before {
            ambiguous.insert(name);
        }
    }
    names.retain(|name, _| !ambiguous.contains(name));
    Ok(names)
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

    /// Variables are named by their own names; a name two variables share, a name that is
    /// another tensor's key, a tensor that is not a variable's value, a variable without a
    /// name and a key the checkpoint lacks are not.
    #[test]
    fn variables_are_named_by_the_names_they_were_created_with_unless_ambiguous() {
        let keys = ["k/0", "k/1", "k/2", "k/3", "k/4", "k/5", "taken"];
        let bytes = graph(&[
            ("VARIABLE_VALUE", "conv/kernel", "k/0"),
            ("VARIABLE_VALUE", "twice", "k/1"),
            ("VARIABLE_VALUE", "twice", "k/2"),
            ("VARIABLE_VALUE", "taken", "k/3"),
            ("OTHER", "not/a/value", "k/4"),
            ("VARIABLE_VALUE", "", "k/5"),
            ("VARIABLE_VALUE", "gone", "k/6"),
        ]);
        let names = variable_names(&bytes, |key| keys.contains(&key)).unwrap();
        let expected = BTreeMap::from([("conv/kernel".to_string(), "k/0".to_string())]);
        assert_eq!(names, expected);
        assert!(variable_names(b"\xff\xff", |_| true).is_err());
    }
}
