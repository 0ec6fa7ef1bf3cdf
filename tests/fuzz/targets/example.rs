//! `tf.train.Example` parsing into an `ImageRecord`; what parses re-encodes to itself.

use burn_towers::data::tf_example::ImageRecord;

use super::seed_examples;
use crate::fuzz;
use crate::mutate::mutated;

#[test]
fn fuzz_tf_example() {
    fuzz("tf.train.Example", mutated(seed_examples()), |bytes| {
        let Ok(record) = ImageRecord::parse(&bytes) else {
            return false;
        };
        let again = ImageRecord::parse(&record.encode()).expect("a re-encoded record parses");
        // Compared as text: a NaN box coordinate is a value that must survive too.
        let same = format!("{again:?}") == format!("{record:?}");
        assert!(same, "re-encoding changed the record");
        true
    });
}
