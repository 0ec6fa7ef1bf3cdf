//! The tests' one check of an error message: that it names what it concerns (the file, the
//! record, the tensor, the device entry), as every error of burn-towers must.

use std::error::Error;
use std::fmt::Display;

/// `error` and its causes (`source()`, then theirs) on one line, `message: cause: cause`
/// ([`towers_multigpu::ErrorChain`]): the text to look for names in, now that our errors keep
/// their causes out of their messages.
pub fn report(error: &(dyn Error + 'static)) -> String {
    towers_multigpu::ErrorChain(error).to_string()
}

/// Asserts that `error`'s message names each of `names`: file names, `record 3`, tensor names,
/// the reason. The message is the alternate form (`{:#}`), which for an `anyhow::Error` is the
/// whole chain and for our errors the message itself. On failure it prints the names missing and
/// the whole message.
#[track_caller]
pub fn assert_error_names(error: &(impl Display + ?Sized), names: &[&str]) {
    let message = format!("{error:#}");
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !message.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "the error does not name {missing:?}: {message}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Layer(&'static str, #[source] Option<Box<Layer>>);

    #[test]
    fn a_report_holds_each_cause_once_in_order() {
        let chain = Layer(
            "input",
            Some(Box::new(Layer(
                "thread 'reader-1'",
                Some(Box::new(Layer("/data/a.bin", None))),
            ))),
        );
        assert_eq!(report(&chain), "input: thread 'reader-1': /data/a.bin");
    }

    #[test]
    fn an_error_naming_everything_passes() {
        let error = std::io::Error::other("/data/a.bin, record 3: bad CRC");
        assert_error_names(&error, &["/data/a.bin", "record 3", "CRC"]);
    }

    #[test]
    #[should_panic(expected = "the error does not name [\"record 4\"]")]
    fn an_error_missing_a_name_fails_and_says_which() {
        let error = std::io::Error::other("/data/a.bin, record 3: bad CRC");
        assert_error_names(&error, &["/data/a.bin", "record 4"]);
    }
}
