//! What a pickle holds: its values in one arena, referred to by index.
//!
//! An arena rather than shared pointers because Python's memo shares values (a list put in the
//! memo before its items are appended is the same list when fetched), and a pickle can make
//! cycles: indices share without reference counts, and the whole pickle is freed at once.

/// A value's place in its [`Pickle`]'s arena.
pub(crate) type ValueId = usize;

/// A byte string of the file (Python 2's `str`, `bytes`, `bytearray`): where it lies, and its
/// bytes when it is short ([`SHORT_STRING`] bytes at most), as names and keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByteString {
    /// Where its first byte is in the file.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Its bytes, when `len <= SHORT_STRING`.
    pub content: Option<Box<[u8]>>,
}

/// The longest byte string whose bytes are kept (keys, dtype codes, file names): longer ones
/// are data, read from the file where they lie.
pub(crate) const SHORT_STRING: u64 = 256;

/// One value. Objects a pickle would construct (`REDUCE`, `NEWOBJ`) are kept as what would be
/// called, with what, and the state `BUILD` would set: nothing is run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Text of [`SHORT_STRING`] bytes at most (`str`; lone surrogates, which Python writes as
    /// it reads them, as U+FFFD).
    Text(String),
    /// Longer text, left in the file: no name or key is that long.
    LongText(ByteString),
    Bytes(ByteString),
    Tuple(Vec<ValueId>),
    List(Vec<ValueId>),
    /// Entries in the order they were set; of a key set twice, the later entry counts.
    Dict(Vec<(ValueId, ValueId)>),
    /// A class or function by its qualified name (`numpy.core.multiarray._reconstruct`).
    Global(String),
    Object {
        /// The qualified name of the callable or class.
        callable: String,
        /// The arguments' tuple.
        args: ValueId,
        /// The state a `BUILD` gave it.
        state: Option<ValueId>,
    },
}

/// A whole pickle: its values and the one it returns.
#[derive(Debug)]
pub(crate) struct Pickle {
    pub(super) values: Vec<Value>,
    pub(super) root: ValueId,
}

impl Pickle {
    /// The value the pickle returns.
    pub(crate) fn root(&self) -> ValueId {
        self.root
    }

    /// The value at `id`.
    pub(crate) fn value(&self, id: ValueId) -> &Value {
        &self.values[id]
    }

    /// The value under `key` in the dict `dict`: a text key or a byte-string key with those
    /// bytes (Python 2 pickles' keys are byte strings). `None` when `dict` is not a dict or
    /// holds no such key.
    pub(crate) fn get(&self, dict: ValueId, key: &str) -> Option<ValueId> {
        let Value::Dict(entries) = self.value(dict) else {
            return None;
        };
        entries
            .iter()
            .rev()
            .find(|(k, _)| self.text(*k) == Some(key))
            .map(|(_, v)| *v)
    }

    /// The keys of the dict `dict` that are text, for messages.
    pub(crate) fn keys(&self, dict: ValueId) -> Vec<&str> {
        match self.value(dict) {
            Value::Dict(entries) => entries.iter().filter_map(|(k, _)| self.text(*k)).collect(),
            _ => Vec::new(),
        }
    }

    /// The text of a text value, or of a short byte string that is UTF-8.
    pub(crate) fn text(&self, id: ValueId) -> Option<&str> {
        match self.value(id) {
            Value::Text(text) => Some(text),
            Value::Bytes(ByteString {
                content: Some(bytes),
                ..
            }) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The items of a tuple or list.
    pub(crate) fn items(&self, id: ValueId) -> Option<&[ValueId]> {
        match self.value(id) {
            Value::Tuple(items) | Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// Python's name for the type of the value at `id`, for messages.
    pub(crate) fn type_name(&self, id: ValueId) -> String {
        self.value(id).type_name()
    }
}

impl Value {
    /// Python's name for this value's type, for messages.
    pub(crate) fn type_name(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Float(_) => "float".into(),
            Value::Text(_) | Value::LongText(_) => "str".into(),
            Value::Bytes(_) => "bytes".into(),
            Value::Tuple(_) => "tuple".into(),
            Value::List(_) => "list".into(),
            Value::Dict(_) => "dict".into(),
            Value::Global(name) => format!("the class or function {name}"),
            Value::Object { callable, .. } => format!("an object made by {callable}"),
        }
    }
}

/// The integer of `bytes` (at most 8), little-endian, two's complement when `signed`: what
/// pickle's `LONG1` and numpy's integer elements hold.
pub(crate) fn little_endian_int(bytes: &[u8], signed: bool) -> i64 {
    let negative = signed && bytes.last().is_some_and(|b| b & 0x80 != 0);
    let mut wide = [if negative { 0xff } else { 0 }; 8];
    wide[..bytes.len()].copy_from_slice(bytes);
    i64::from_le_bytes(wide)
}
