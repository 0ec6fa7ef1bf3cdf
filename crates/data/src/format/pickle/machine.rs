//! The pickle machine: each opcode of protocols 2 to 5 (the binary ones) on a stack of values,
//! with Python's memo and marks, as `pickle.load` runs them, but nothing is imported or called.
//!
//! Bounded: a byte string longer than [`SHORT_STRING`] is skipped over and kept as its place,
//! text and short strings take [`MAX_STRING_BYTES`] at most, and a file makes at most
//! [`MAX_VALUES`] values, memo entries and marks; past either, it is refused.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::value::{ByteString, Pickle, SHORT_STRING, Value, ValueId, little_endian_int};
use crate::error::{Error, Result};

/// The most values, memo entries and marks one pickle may make: a CIFAR-10 batch makes about
/// 40,000 (its labels and file names).
pub(crate) const MAX_VALUES: usize = 1 << 20;

/// The most bytes of text and short byte strings one pickle may hold in memory.
const MAX_STRING_BYTES: u64 = 16 << 20;

/// The longest line of a `GLOBAL` opcode (a module or a name).
const MAX_NAME: usize = 256;

/// Reads the pickle in `path`. A file that is not a pickle, is cut short, uses an opcode this
/// machine does not run or goes past its bounds is an error naming the file and the byte.
pub(crate) fn read_pickle(path: &Path) -> Result<Pickle> {
    let file = File::open(path).map_err(Error::io_at(path))?;
    let size = file.metadata().map_err(Error::io_at(path))?.len();
    let mut machine = Machine::new(BufReader::new(file), size);
    machine.run().map_err(|stop| match stop {
        Stop::Io(error) => Error::Io {
            path: path.to_path_buf(),
            error,
        },
        Stop::Bad(reason) => Error::File {
            path: path.to_path_buf(),
            reason: format!("pickle byte {}: {reason}", machine.opcode_at),
        },
    })
}

/// Why the machine stopped short.
enum Stop {
    Io(std::io::Error),
    Bad(String),
}

impl From<std::io::Error> for Stop {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            Stop::Bad("the file ends inside this opcode (cut short?)".into())
        } else {
            Stop::Io(error)
        }
    }
}

type Step<T = ()> = std::result::Result<T, Stop>;

fn bad<T>(reason: impl Into<String>) -> Step<T> {
    Err(Stop::Bad(reason.into()))
}

struct Machine {
    input: BufReader<File>,
    size: u64,
    /// Where the next byte is read.
    at: u64,
    /// Where the opcode being run starts, for messages.
    opcode_at: u64,
    values: Vec<Value>,
    stack: Vec<ValueId>,
    /// The stack's length at each open mark.
    marks: Vec<usize>,
    memo: HashMap<u64, ValueId>,
    /// Values, memo entries and marks made so far.
    made: usize,
    string_bytes: u64,
}

impl Machine {
    fn new(input: BufReader<File>, size: u64) -> Self {
        Self {
            input,
            size,
            at: 0,
            opcode_at: 0,
            values: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            made: 0,
            string_bytes: 0,
        }
    }

    fn run(&mut self) -> Step<Pickle> {
        let head = self.input.fill_buf()?;
        match head.first() {
            None => return bad("the file is empty"),
            Some(0x80) => {}
            Some(_) => return bad(not_a_pickle(head)),
        }
        loop {
            self.opcode_at = self.at;
            let opcode = match self.byte() {
                Err(Stop::Bad(_)) => {
                    return bad("the file ends before the pickle's STOP (cut short?)");
                }
                other => other?,
            };
            if opcode == b'.' {
                let root = self.pop()?;
                let values = std::mem::take(&mut self.values);
                return Ok(Pickle { values, root });
            }
            self.run_opcode(opcode)?;
        }
    }

    fn run_opcode(&mut self, opcode: u8) -> Step {
        match opcode {
            0x80 => self.protocol(),
            0x95 => self.read_u64().map(drop), // FRAME: a hint for buffering
            b'(' => self.mark(),
            b'0' => self.pop().map(drop),
            b'1' => self.pop_mark().map(drop),
            b'2' => self.dup(),
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            b'K' => self.read_u8_int(),
            b'M' => self.read_u16_int(),
            b'J' => self.read_i32_int(),
            0x8a => self.long1(),
            b'G' => self.float(),
            b'U' | b'C' | b'T' | b'B' | 0x8e | 0x96 => {
                let len = self.string_length(opcode)?;
                self.byte_string(len)
            }
            0x8c | b'X' | 0x8d => {
                let len = self.string_length(opcode)?;
                self.text(len)
            }
            b')' => self.push(Value::Tuple(Vec::new())),
            b't' => self.tuple_from_mark(),
            0x85..=0x87 => self.tuple_of(usize::from(opcode - 0x84)),
            b']' => self.push(Value::List(Vec::new())),
            b'l' => self.list_from_mark(),
            b'a' => self.append(1),
            b'e' => self.appends(),
            b'}' => self.push(Value::Dict(Vec::new())),
            b'd' => self.dict_from_mark(),
            b's' => self.set_items(2),
            b'u' => self.set_items_from_mark(),
            b'q' | b'r' | 0x94 => {
                let index = self.memo_index(opcode)?;
                self.put(index)
            }
            b'h' | b'j' => {
                let index = self.memo_index(opcode)?;
                self.get(index)
            }
            b'c' => self.global(),
            0x93 => self.stack_global(),
            b'R' | 0x81 => self.reduce(),
            b'b' => self.build(),
            other => bad(unsupported(other)),
        }
    }

    fn protocol(&mut self) -> Step {
        match self.byte()? {
            2..=5 => Ok(()),
            version => bad(format!(
                "pickle protocol {version}: this reader runs 2 to 5"
            )),
        }
    }

    // --- the stack, marks and memo

    /// Counts one more value, memo entry or mark against [`MAX_VALUES`].
    fn count(&mut self) -> Step {
        self.made += 1;
        if self.made > MAX_VALUES {
            return bad(format!(
                "more than {MAX_VALUES} values: not a dataset's batch (refused to bound memory)"
            ));
        }
        Ok(())
    }

    fn push(&mut self, value: Value) -> Step {
        self.count()?;
        self.values.push(value);
        self.stack.push(self.values.len() - 1);
        Ok(())
    }

    fn push_id(&mut self, id: ValueId) -> Step {
        self.count()?;
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self) -> Step<ValueId> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return bad("the stack is empty here (not a pickle, or a damaged one)");
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    /// The top `count` values, in the order they were pushed.
    fn pop_many(&mut self, count: usize) -> Step<Vec<ValueId>> {
        let mut items = (0..count).map(|_| self.pop()).collect::<Step<Vec<_>>>()?;
        items.reverse();
        Ok(items)
    }

    fn top(&self) -> Step<ValueId> {
        match self.stack.last() {
            Some(&id) if self.stack.len() > self.marks.last().copied().unwrap_or(0) => Ok(id),
            _ => bad("the stack is empty here (not a pickle, or a damaged one)"),
        }
    }

    fn dup(&mut self) -> Step {
        let top = self.top()?;
        self.push_id(top)
    }

    fn mark(&mut self) -> Step {
        self.count()?;
        self.marks.push(self.stack.len());
        Ok(())
    }

    /// The values above the last mark, the mark removed.
    fn pop_mark(&mut self) -> Step<Vec<ValueId>> {
        let Some(mark) = self.marks.pop() else {
            return bad("no mark to pop to (not a pickle, or a damaged one)");
        };
        Ok(self.stack.split_off(mark))
    }

    /// The memo index after a memo opcode: 1 or 4 bytes, or MEMOIZE's next one.
    fn memo_index(&mut self, opcode: u8) -> Step<u64> {
        match opcode {
            b'q' | b'h' => Ok(u64::from(self.byte()?)),
            b'r' | b'j' => Ok(u64::from(self.read_u32()?)),
            _ => Ok(self.memo.len() as u64),
        }
    }

    fn put(&mut self, index: u64) -> Step {
        let top = self.top()?;
        self.count()?;
        self.memo.insert(index, top);
        Ok(())
    }

    fn get(&mut self, index: u64) -> Step {
        match self.memo.get(&index) {
            Some(&id) => self.push_id(id),
            None => bad(format!("memo entry {index} was never set")),
        }
    }

    // --- reading the file

    fn byte(&mut self) -> Step<u8> {
        Ok(self.bytes::<1>()?[0])
    }

    fn bytes<const N: usize>(&mut self) -> Step<[u8; N]> {
        let mut bytes = [0; N];
        self.input.read_exact(&mut bytes)?;
        self.at += N as u64;
        Ok(bytes)
    }

    fn read_u32(&mut self) -> Step<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn read_u64(&mut self) -> Step<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    /// The next `len` bytes, checked to be in the file before anything is allocated.
    fn take(&mut self, len: u64) -> Step<Vec<u8>> {
        self.check_in_file(len)?;
        let mut bytes = vec![0; len as usize];
        self.input.read_exact(&mut bytes)?;
        self.at += len;
        Ok(bytes)
    }

    fn check_in_file(&self, len: u64) -> Step {
        // A file that grew since its size was read has nothing left past that size for us.
        let left = self.size.saturating_sub(self.at);
        if len > left {
            return bad(format!(
                "a string of {len} bytes, but the file has {left} bytes left (cut short?)"
            ));
        }
        Ok(())
    }

    /// Counts `len` bytes of text or short strings against [`MAX_STRING_BYTES`].
    fn count_string(&mut self, len: u64) -> Step {
        self.string_bytes += len;
        if self.string_bytes > MAX_STRING_BYTES {
            return bad(format!(
                "more than {MAX_STRING_BYTES} bytes of text outside byte strings: not a \
                 dataset's batch (refused to bound memory)"
            ));
        }
        Ok(())
    }

    // --- numbers and strings

    fn read_u8_int(&mut self) -> Step {
        let value = self.byte()?;
        self.push(Value::Int(i64::from(value)))
    }

    fn read_u16_int(&mut self) -> Step {
        let value = u16::from_le_bytes(self.bytes()?);
        self.push(Value::Int(i64::from(value)))
    }

    fn read_i32_int(&mut self) -> Step {
        let value = i32::from_le_bytes(self.bytes()?);
        self.push(Value::Int(i64::from(value)))
    }

    /// LONG1: an int of n little-endian two's-complement bytes; n at most 8 here.
    fn long1(&mut self) -> Step {
        let len = usize::from(self.byte()?);
        if len > 8 {
            return bad(format!("an int of {len} bytes: wider than 64 bits"));
        }
        let bytes = self.take(len as u64)?;
        self.push(Value::Int(little_endian_int(&bytes, true)))
    }

    fn float(&mut self) -> Step {
        let value = f64::from_be_bytes(self.bytes()?);
        self.push(Value::Float(value))
    }

    /// The length after a string opcode: 1, 4 or 8 bytes (BINSTRING's, Python 2's `str`,
    /// signed).
    fn string_length(&mut self, opcode: u8) -> Step<u64> {
        match opcode {
            b'U' | b'C' | 0x8c => Ok(u64::from(self.byte()?)),
            b'B' | b'X' => Ok(u64::from(self.read_u32()?)),
            b'T' => {
                let len = i32::from_le_bytes(self.bytes()?);
                u64::try_from(len).or_else(|_| bad(format!("a string of negative length {len}")))
            }
            _ => self.read_u64(),
        }
    }

    /// A byte string of `len` bytes: its bytes read when short, skipped over otherwise.
    fn byte_string(&mut self, len: u64) -> Step {
        let offset = self.at;
        let content = if len <= SHORT_STRING {
            self.count_string(len)?;
            Some(self.take(len)?.into_boxed_slice())
        } else {
            self.skip(len)?;
            None
        };
        self.push(Value::Bytes(ByteString {
            offset,
            len,
            content,
        }))
    }

    /// Moves past `len` bytes that are in the file.
    fn skip(&mut self, len: u64) -> Step {
        self.check_in_file(len)?;
        let skip = i64::try_from(len).expect("a length within the file's size");
        self.input.seek_relative(skip)?;
        self.at += len;
        Ok(())
    }

    /// A text string of `len` bytes: read when short (lone surrogates, which Python writes
    /// with `surrogatepass`, as U+FFFD), skipped over otherwise.
    fn text(&mut self, len: u64) -> Step {
        if len > SHORT_STRING {
            let offset = self.at;
            self.skip(len)?;
            return self.push(Value::LongText(ByteString {
                offset,
                len,
                content: None,
            }));
        }
        self.count_string(len)?;
        let bytes = self.take(len)?;
        self.push(Value::Text(String::from_utf8_lossy(&bytes).into_owned()))
    }

    // --- containers

    fn tuple_from_mark(&mut self) -> Step {
        let items = self.pop_mark()?;
        self.push(Value::Tuple(items))
    }

    fn tuple_of(&mut self, count: usize) -> Step {
        let items = self.pop_many(count)?;
        self.push(Value::Tuple(items))
    }

    fn list_from_mark(&mut self) -> Step {
        let items = self.pop_mark()?;
        self.push(Value::List(items))
    }

    fn append(&mut self, count: usize) -> Step {
        let items = self.pop_many(count)?;
        self.extend_list(items)
    }

    fn appends(&mut self) -> Step {
        let items = self.pop_mark()?;
        self.extend_list(items)
    }

    fn extend_list(&mut self, items: Vec<ValueId>) -> Step {
        let list = self.top()?;
        match &mut self.values[list] {
            Value::List(existing) => {
                existing.extend(items);
                Ok(())
            }
            _ => bad(format!("APPEND to {}, not a list", self.type_name(list))),
        }
    }

    fn dict_from_mark(&mut self) -> Step {
        let items = self.pop_mark()?;
        self.push(Value::Dict(Vec::new()))?;
        let dict = self.top()?;
        self.insert(dict, items)
    }

    fn set_items(&mut self, count: usize) -> Step {
        let items = self.pop_many(count)?;
        let dict = self.top()?;
        self.insert(dict, items)
    }

    fn set_items_from_mark(&mut self) -> Step {
        let items = self.pop_mark()?;
        let dict = self.top()?;
        self.insert(dict, items)
    }

    /// Adds the key-value pairs `items` to `dict`. A key set twice is kept twice, the later
    /// entry the one [`Pickle::get`] finds, as the later one replaces the earlier in Python:
    /// replacing here would compare every key with every other.
    fn insert(&mut self, dict: ValueId, items: Vec<ValueId>) -> Step {
        if !items.len().is_multiple_of(2) {
            return bad("a dict's items come in key-value pairs: one is missing its value");
        }
        let Value::Dict(entries) = &mut self.values[dict] else {
            return bad(format!("SETITEM on {}, not a dict", self.type_name(dict)));
        };
        entries.extend(items.chunks(2).map(|pair| (pair[0], pair[1])));
        Ok(())
    }

    // --- globals and objects

    /// GLOBAL: a module and a name, each on a line.
    fn global(&mut self) -> Step {
        let module = self.line()?;
        let name = self.line()?;
        self.count_string((module.len() + name.len()) as u64)?;
        self.push(Value::Global(format!("{module}.{name}")))
    }

    fn line(&mut self) -> Step<String> {
        let mut line = Vec::new();
        let read = (&mut self.input)
            .take(MAX_NAME as u64 + 1)
            .read_until(b'\n', &mut line)?;
        self.at += read as u64;
        if line.pop() != Some(b'\n') {
            return bad(format!(
                "a GLOBAL's name longer than {MAX_NAME} bytes or cut short"
            ));
        }
        String::from_utf8(line).or_else(|_| bad("a GLOBAL's name that is not UTF-8"))
    }

    fn stack_global(&mut self) -> Step {
        let name = self.pop()?;
        let module = self.pop()?;
        let (Value::Text(module), Value::Text(name)) = (&self.values[module], &self.values[name])
        else {
            return bad("STACK_GLOBAL of values that are not short text");
        };
        let qualified = format!("{module}.{name}");
        // Each copy of a name counts: a memo entry fetched again and again is not free.
        self.count_string(qualified.len() as u64)?;
        self.push(Value::Global(qualified))
    }

    /// REDUCE and NEWOBJ: what calling a global would make, kept as the call.
    fn reduce(&mut self) -> Step {
        let args = self.pop()?;
        let callable = self.pop()?;
        let Value::Global(name) = &self.values[callable] else {
            return bad(format!("a call of {}", self.type_name(callable)));
        };
        let callable = name.clone();
        self.count_string(callable.len() as u64)?;
        self.push(Value::Object {
            callable,
            args,
            state: None,
        })
    }

    fn build(&mut self) -> Step {
        let new_state = self.pop()?;
        let object = self.top()?;
        match &mut self.values[object] {
            Value::Object { state, .. } => {
                *state = Some(new_state);
                Ok(())
            }
            _ => bad(format!(
                "BUILD of {}, not an object",
                self.type_name(object)
            )),
        }
    }

    fn type_name(&self, id: ValueId) -> String {
        self.values[id].type_name()
    }
}

/// What a file that does not start as a pickle of protocol 2 or later (`PROTO`, 0x80) seems
/// to be, from its first bytes.
fn not_a_pickle(head: &[u8]) -> String {
    let what = if head.starts_with(b"PK\x03\x04") {
        "a zip archive (a torch.save file?)"
    } else if head.starts_with(&[0x1f, 0x8b]) {
        "GZIP data (a download still compressed? extract it first)"
    } else if head.get(257..262) == Some(b"ustar") {
        "a tar archive (extract it first)"
    } else if matches!(head[0], b'(' | b'}' | b']' | b'c' | b'l' | b'd') {
        "a pickle of protocol 0 or 1 (re-save it with protocol 3 or later)"
    } else {
        "not a pickle"
    };
    format!(
        "{what}: a pickle of protocol 2 to 5 starts with byte 0x80, this file with 0x{:02x}",
        head[0]
    )
}

/// What an opcode this machine does not run is, for the message.
fn unsupported(opcode: u8) -> String {
    let shown = if opcode.is_ascii_graphic() {
        format!("0x{opcode:02x} ('{}')", opcode as char)
    } else {
        format!("0x{opcode:02x}")
    };
    match opcode {
        0x97 | 0x98 => format!("opcode {shown}: out-of-band buffers, which are not in the file"),
        _ => format!(
            "opcode {shown}, which this reader does not run: not a pickle of plain data and \
             numpy arrays, or a damaged one"
        ),
    }
}
