//! Reading the bytes of consecutive records of a file, shared by the pipeline's readers and
//! [`RecordDataset`](crate::RecordDataset).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::memory_room::{Memory, buffer_within_memory};
use crate::format::{RecordSpan, record_error};

/// Reads the bytes from the first record's start to the last one's end of `file` (at `path`)
/// into `bytes`. `records` are (index in the file, span) pairs in file order, at least one. A
/// file that ends early (it shrank after it was indexed) names the first record it lost; bytes
/// that would take more than half the memory available (`memory_room.rs`) are not read, and
/// the error names the largest record.
pub(crate) fn read_records(
    file: &mut File,
    path: &Path,
    records: &[(usize, RecordSpan)],
    bytes: &mut Vec<u8>,
) -> Result<()> {
    let io = Error::io_at(path);
    let (first, last) = (records[0].1, records[records.len() - 1].1);
    let end = last.offset + last.len as u64;
    if let Err(reason) = buffer_within_memory(end - first.offset, Memory::now) {
        let (largest, span) = records
            .iter()
            .max_by_key(|(_, span)| span.len)
            .expect("at least one record");
        let reason = format!("a record of {} bytes: {reason}", span.len);
        return Err(record_error(path, *largest, reason));
    }
    file.seek(SeekFrom::Start(first.offset)).map_err(&io)?;
    bytes.resize((end - first.offset) as usize, 0);
    match file.read_exact(bytes) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            let size = file.metadata().map_err(&io)?.len();
            let ends = |span: &RecordSpan| span.offset + span.len as u64;
            let (record, span) = records
                .iter()
                .find(|(_, span)| ends(span) > size)
                .unwrap_or(&records[0]);
            let reason = format!(
                "truncated: the file ends at byte {size}, the record at {}",
                ends(span)
            );
            Err(record_error(path, *record, reason))
        }
        Err(e) => Err(io(e)),
    }
}
