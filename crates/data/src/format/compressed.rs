//! Dataset files TF wrote compressed (`TFRecordOptions(compression_type="GZIP")` or `"ZLIB"`,
//! the `compression_type` of `TFRecordDataset` and `FixedLengthRecordDataset`), and their
//! decompressed copies.
//!
//! The readers take records by offset, from several threads at once, which a compressed
//! stream cannot give: so a compressed file is decompressed once, streaming (the memory stays
//! that of the decoder and a buffer), into a temporary file that is read as an uncompressed
//! one and deleted when the last holder drops it. On Linux that file has no name
//! ([`CopyFile`]), so that the kernel deletes it however the process ends: a copy can be
//! gigabytes, and a second Ctrl-C, a `kill -9` or a crash runs no destructor. Decompression is
//! the `flate2` crate's (already in the tree, through `image`'s PNG decoder). A copy stops
//! before it fills its disk ([`RoomKeepingWriter`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

use flate2::read::{MultiGzDecoder, ZlibDecoder};
use tempfile::TempPath;
use towers_multigpu::{ScratchPath, list_scratch};

use crate::error::{Error, Result};
use crate::format::disk_room::{DiskSpace, RoomKeepingWriter};

/// How a dataset file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// GZIP (RFC 1952), as TF's `compression_type="GZIP"` and `gzip` write it.
    Gzip,
    /// ZLIB (RFC 1950), as TF's `compression_type="ZLIB"` writes it.
    Zlib,
}

impl Compression {
    /// The compression whose header `start` begins with, if any: GZIP for the magic `1f 8b`
    /// and deflate (`08`), ZLIB for deflate with a window of at most 32 KiB and a header whose
    /// two bytes are a multiple of 31 (TF writes `78 9c`). An uncompressed file may begin with
    /// the same bytes (a TFRecord begins with any length): ask only when reading it as
    /// uncompressed failed.
    pub fn of_header(start: &[u8]) -> Option<Self> {
        match *start {
            [0x1f, 0x8b, 0x08, ..] => Some(Self::Gzip),
            [cmf, flg, ..]
                if cmf & 0x0f == 8 && cmf >> 4 <= 7 && u16::from_be_bytes([cmf, flg]) % 31 == 0 =>
            {
                Some(Self::Zlib)
            }
            _ => None,
        }
    }

    /// The compression `path` begins with (see [`of_header`](Self::of_header)).
    pub fn of_file(path: &Path) -> Result<Option<Self>> {
        let mut start = Vec::with_capacity(3);
        File::open(path)
            .and_then(|file| file.take(3).read_to_end(&mut start))
            .map_err(Error::io_at(path))?;
        Ok(Self::of_header(&start))
    }

    /// TF's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "GZIP",
            Self::Zlib => "ZLIB",
        }
    }

    /// A decoder of `compressed`. GZIP takes every member, as `gunzip` does.
    fn decoder<'a>(self, compressed: impl Read + 'a) -> Box<dyn Read + 'a> {
        match self {
            Self::Gzip => Box::new(MultiGzDecoder::new(compressed)),
            Self::Zlib => Box::new(ZlibDecoder::new(compressed)),
        }
    }
}

/// The decompressed contents of a compressed dataset file, in a temporary file (under
/// `std::env::temp_dir()`: `TMPDIR` on Unix) that is deleted when this is dropped.
#[derive(Debug)]
pub(crate) struct DecompressedCopy {
    file: CopyFile,
    /// Its size in bytes.
    len: u64,
}

/// The temporary file of a copy, and a path that opens it (readers open it, each with its own
/// position in it).
#[derive(Debug)]
enum CopyFile {
    /// A file without a name, held open: the kernel deletes it when the last descriptor
    /// closes, at the latest when the process ends. Opened again through `/proc/self/fd`,
    /// which gives each opener a position of its own.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Unnamed { _held: File, path: PathBuf },
    /// A named temporary file, deleted on drop (and listed for an exit without destructors):
    /// where a file cannot be opened again without a name (no `/proc`, not Linux), or where
    /// half the process's descriptors already hold copies.
    Named {
        path: TempPath,
        _listed: ScratchPath,
    },
}

impl CopyFile {
    /// A new temporary file for the copy of `name`, and a descriptor to write it through.
    fn create(name: &str) -> std::io::Result<(File, Self)> {
        #[cfg(target_os = "linux")]
        if let Some(unnamed) = Self::unnamed() {
            return Ok(unnamed);
        }
        let (file, path) = tempfile::Builder::new()
            .prefix(&format!("towers-{name}-"))
            .tempfile()?
            .into_parts();
        let _listed = list_scratch(&path);
        Ok((file, Self::Named { path, _listed }))
    }

    /// A file without a name (tempfile's: `O_TMPFILE`, or created and unlinked at once), if
    /// `/proc/self/fd` opens it and fewer than [`most_held_open`] are held.
    #[cfg(target_os = "linux")]
    fn unnamed() -> Option<(File, Self)> {
        use std::os::fd::AsRawFd;
        if HELD_OPEN.fetch_add(1, Ordering::Relaxed) >= most_held_open() {
            HELD_OPEN.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let made = tempfile::tempfile().ok().and_then(|file| {
            let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            File::open(&path).ok()?;
            let writer = file.try_clone().ok()?;
            Some((writer, Self::Unnamed { _held: file, path }))
        });
        if made.is_none() {
            HELD_OPEN.fetch_sub(1, Ordering::Relaxed);
        }
        made
    }

    fn path(&self) -> &Path {
        match self {
            Self::Unnamed { path, .. } => path,
            Self::Named { path, .. } => path,
        }
    }
}

impl Drop for CopyFile {
    fn drop(&mut self) {
        if let Self::Unnamed { .. } = self {
            HELD_OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The copies without a name that this process holds open, a descriptor each.
static HELD_OPEN: AtomicUsize = AtomicUsize::new(0);

/// How many copies may be held open without a name: half the process's descriptors (its soft
/// limit, often 1024), so that a `RecordDataset` of ImageNet's 1024 compressed shards, which
/// keeps every copy, leaves the rest of the process its files; the copies past that are named.
#[cfg(target_os = "linux")]
fn most_held_open() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit / 2).unwrap_or(usize::MAX)
    })
}

/// A copy and how its compressed data ended.
pub(crate) type Decompressed = (DecompressedCopy, Ending);

/// How a compressed file's data ended. The copy holds what decompressed before the end.
#[derive(Debug)]
pub(crate) enum Ending {
    /// Whole: every member to its checksum, and the checksums matched.
    Whole,
    /// Cut short: the file ends inside the compressed data, its header or its checksum (the
    /// error names the file and where). TF's readers take the bytes decompressed before the
    /// cut as the file's data, and its record framing judges them (checked against TF 2.21 at
    /// every cut of a TF-written file, `tests/tf_compressed.rs`): whole records are read, a
    /// record cut in two is an error.
    CutShort(Error),
    /// Corrupt: data that does not decompress, or a checksum that does not match; TF refuses
    /// the file.
    Corrupt(Error),
}

impl DecompressedCopy {
    /// Decompresses `original` into a new temporary file. Failing to write the copy (a full
    /// disk, or one whose [reserve](DiskSpace::reserve) it would eat into) is an error;
    /// compressed data cut short or corrupt gives the copy so far and an [`Ending`] saying so,
    /// naming `original`.
    pub(crate) fn new(original: &Path, compression: Compression) -> Result<Decompressed> {
        Self::new_on(original, compression, DiskSpace::of)
    }

    /// [`new`](Self::new), with `space` telling the room left on the copy's disk.
    fn new_on(
        original: &Path,
        compression: Compression,
        mut space: impl FnMut(&File) -> std::io::Result<Option<DiskSpace>>,
    ) -> Result<Decompressed> {
        let name = original.file_name().unwrap_or_default().to_string_lossy();
        let failed = |doing: &str, error: std::io::Error| Error::File {
            path: original.to_path_buf(),
            reason: format!("{} {doing}: {error}", compression.name()),
        };
        let input = File::open(original).map_err(Error::io_at(original))?;
        let (file, copy) = CopyFile::create(&name)
            .map_err(|e| failed("file: creating its decompressed copy", e))?;
        let dir = std::env::temp_dir();
        let writing = |e| {
            failed(
                &format!("file: writing its decompressed copy in {dir:?}"),
                e,
            )
        };
        let mut out = RoomKeepingWriter::new(&file, || space(&file));
        let mut decoder = compression.decoder(BufReader::new(input));
        let (len, error) = copy_until_error(&mut decoder, &mut out).map_err(&writing)?;
        out.flush().map_err(&writing)?;
        let ending = match error {
            None => Ending::Whole,
            Some(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                let reason = format!("data, cut short after {len} decompressed bytes");
                Ending::CutShort(failed(&reason, error))
            }
            Some(error) => {
                let reason = format!("data, corrupt after {len} decompressed bytes");
                Ending::Corrupt(failed(&reason, error))
            }
        };
        Ok((Self { file: copy, len }.list(original, compression), ending))
    }

    /// A path that opens the copy.
    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }

    /// Lists the copy under its `original` for [`shown_name`] while it lives.
    fn list(self, original: &Path, compression: Compression) -> Self {
        let shown = format!(
            "{} (its {}-decompressed data)",
            original.display(),
            compression.name()
        );
        originals().insert(self.path().to_path_buf(), shown);
        self
    }

    /// Its size in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for DecompressedCopy {
    fn drop(&mut self) {
        originals().remove(self.path());
    }
}

/// How a message names the file at `path`: by its path, or, for a live decompressed copy
/// (`/proc/self/fd/7` on Linux), by the file it was decompressed from. A format's warning
/// about a file's contents (`tfrecord`'s stray bytes) sees only the copy's path.
pub(crate) fn shown_name(path: &Path) -> String {
    match originals().get(path) {
        Some(shown) => shown.clone(),
        None => path.display().to_string(),
    }
}

/// The names [`shown_name`] gives the live copies, by their paths.
fn originals() -> std::sync::MutexGuard<'static, HashMap<PathBuf, String>> {
    static ORIGINALS: LazyLock<Mutex<HashMap<PathBuf, String>>> = LazyLock::new(Default::default);
    ORIGINALS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Copies `decoder` to `out` until its end or its first read error (the compressed data's:
/// `UnexpectedEof` where `flate2` finds the file cut short, `InvalidInput` where it finds it
/// corrupt): the bytes copied and that error; `Err` is a write error. Unlike `io::copy`, it
/// tells the two apart.
fn copy_until_error(
    decoder: &mut dyn Read,
    out: &mut impl Write,
) -> std::io::Result<(u64, Option<std::io::Error>)> {
    let mut buffer = vec![0u8; 1 << 16];
    let mut copied = 0u64;
    loop {
        let n = match decoder.read(&mut buffer) {
            Ok(0) => return Ok((copied, None)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Ok((copied, Some(e))),
        };
        out.write_all(&buffer[..n])?;
        copied += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_told_apart() {
        assert_eq!(
            Compression::of_header(&[0x1f, 0x8b, 8, 0]),
            Some(Compression::Gzip)
        );
        for zlib in [[0x78, 0x9c], [0x78, 0x01], [0x78, 0xda], [0x58, 0x85]] {
            assert_eq!(Compression::of_header(&zlib), Some(Compression::Zlib));
        }
        // A TFRecord length, a CIFAR-10 label, deflate's window past 32 KiB, a bad check.
        for other in [
            &[12, 0, 0][..],
            &[3, 0x50],
            &[0x88, 0x98],
            &[0x78, 0x9d],
            &[0x1f],
        ] {
            assert_eq!(Compression::of_header(other), None, "{other:?}");
        }
    }

    /// The GZIP compression of `bytes` zeros (a thousand to one).
    fn gzipped_zeros(bytes: usize) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&vec![0u8; bytes]).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_copy_that_would_fill_its_disk_stops_and_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let bomb = dir.path().join("bomb.tfrecord");
        std::fs::write(&bomb, gzipped_zeros(16 << 20)).unwrap();
        // A disk of 100 MiB with 10 left, which shrinks by a MiB at each look.
        let mut looks = 0;
        let shrinking = |_: &File| {
            looks += 1;
            let free = (10u64 << 20).saturating_sub(looks << 20);
            Ok(Some(DiskSpace {
                free,
                total: 100 << 20,
            }))
        };
        let copies = || {
            let names = std::fs::read_dir(std::env::temp_dir()).unwrap();
            let names = names.map(|entry| entry.unwrap().file_name());
            names
                .filter(|name| name.to_string_lossy().starts_with("towers-bomb.tfrecord-"))
                .count()
        };
        let error = DecompressedCopy::new_on(&bomb, Compression::Gzip, shrinking).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&bomb.display().to_string()),
            "{message}"
        );
        assert!(
            message.contains("GZIP file: writing its decompressed copy"),
            "{message}"
        );
        // The first look found 9 MiB free: the copy keeps half of it (4.5 MiB, less than 5%
        // of the disk). The looks at 0 to 3 MiB written found room for the next MiB and the
        // reserve; the one at 4 MiB found 5 MiB free.
        assert!(message.contains("stopped after 4194304 bytes"), "{message}");
        assert!(message.contains("to keep 4718592 bytes"), "{message}");
        assert!(message.contains("set TMPDIR"), "{message}");
        assert_eq!(copies(), 0, "the copy was left behind");
        // With room, the same file decompresses whole.
        let (copy, ending) = DecompressedCopy::new(&bomb, Compression::Gzip).unwrap();
        assert_eq!(copy.len(), 16 << 20);
        assert!(matches!(ending, Ending::Whole), "{ending:?}");
    }

    /// A format's warning about a copy's contents names the file the copy was made from, for
    /// as long as the copy lives.
    #[test]
    fn a_copy_is_shown_by_the_name_of_its_original() {
        let dir = tempfile::tempdir().unwrap();
        let original = dir.path().join("zeros.gz");
        std::fs::write(&original, gzipped_zeros(10)).unwrap();
        let (copy, _) = DecompressedCopy::new(&original, Compression::Gzip).unwrap();
        let path = copy.path().to_path_buf();
        let shown = format!("{} (its GZIP-decompressed data)", original.display());
        assert_eq!(shown_name(&path), shown);
        drop(copy);
        assert_eq!(shown_name(&path), path.display().to_string());
    }

    /// A copy leaves nothing behind however its process ends: a child process makes one, reads
    /// it back through its path, and is killed (SIGKILL: no destructor runs) while it holds it.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_killed_process_leaves_no_copy() {
        use std::io::BufRead;
        const BYTES: usize = 1 << 20;
        if let Some(original) = towers_testing::child::role() {
            let (copy, _) = DecompressedCopy::new(original.as_ref(), Compression::Gzip).unwrap();
            assert_eq!(std::fs::read(copy.path()).unwrap(), vec![0; BYTES]);
            println!("copied");
            std::thread::sleep(std::time::Duration::from_secs(60));
            unreachable!("killed before");
        }
        let dir = tempfile::tempdir().unwrap();
        let (original, tmp) = (dir.path().join("zeros.gz"), dir.path().join("tmp"));
        std::fs::write(&original, gzipped_zeros(BYTES)).unwrap();
        std::fs::create_dir(&tmp).unwrap();
        let test = towers_testing::test_name!("a_killed_process_leaves_no_copy");
        let mut child = towers_testing::child::child(&test, original.to_str().unwrap(), &[], "")
            .env("TMPDIR", &tmp)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let said = stdout.lines().map_while(|line| line.ok());
        assert!(
            // After libtest's `test NAME ... `, on the same line.
            said.take(20).any(|line| line.ends_with("copied")),
            "the child made no copy"
        );
        // The copy is in `tmp`: held by a descriptor (without a name), or named there.
        let in_tmp = |path: PathBuf| path.starts_with(&tmp);
        let held = std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap();
        let mut held = held.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok());
        let named = std::fs::read_dir(&tmp).unwrap().next().is_some();
        assert!(held.any(in_tmp) || named, "no copy in {tmp:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    /// The named copies go with an exit that runs no destructor (a second Ctrl-C): a child
    /// process limited to 64 descriptors makes 40 copies, 8 of them named, and exits so.
    #[test]
    #[cfg(target_os = "linux")]
    fn named_copies_go_with_an_exit_without_destructors() {
        const CODE: i32 = 3;
        if let Some(original) = towers_testing::child::role() {
            let copies: Vec<DecompressedCopy> = (0..40)
                .map(|_| DecompressedCopy::new(original.as_ref(), Compression::Gzip))
                .map(|made| made.unwrap().0)
                .collect();
            let named = (copies.iter())
                .filter(|copy| matches!(copy.file, CopyFile::Named { .. }))
                .count();
            assert_eq!(named, 8);
            towers_multigpu::exit_now(CODE);
        }
        let dir = tempfile::tempdir().unwrap();
        let (original, tmp) = (dir.path().join("zeros.gz"), dir.path().join("tmp"));
        std::fs::write(&original, gzipped_zeros(1000)).unwrap();
        std::fs::create_dir(&tmp).unwrap();
        let test = towers_testing::test_name!("named_copies_go_with_an_exit_without_destructors");
        let child =
            towers_testing::child::child(&test, original.to_str().unwrap(), &[], "ulimit -n 64")
                .env("TMPDIR", &tmp)
                .output()
                .unwrap();
        let said = String::from_utf8_lossy(&child.stdout) + String::from_utf8_lossy(&child.stderr);
        assert_eq!(child.status.code(), Some(CODE), "{said}");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    /// Copies without a name hold a descriptor each, so past half the process's descriptors
    /// they are named: a child process limited to 64 descriptors makes 70 copies, of which 32
    /// have no name, still opens 20 files at once (without the cap the copies took all but a
    /// few descriptors), and reads every copy back.
    #[test]
    #[cfg(target_os = "linux")]
    fn copies_past_half_the_descriptors_are_named() {
        const COPIES: usize = 70;
        if let Some(original) = towers_testing::child::role() {
            let copies: Vec<DecompressedCopy> = (0..COPIES)
                .map(
                    |i| match DecompressedCopy::new(original.as_ref(), Compression::Gzip) {
                        Ok((copy, _)) => copy,
                        Err(error) => panic!("copy {i}: {error}"),
                    },
                )
                .collect();
            let unnamed = (copies.iter())
                .filter(|copy| matches!(copy.file, CopyFile::Unnamed { .. }))
                .count();
            assert_eq!(unnamed, 32);
            let open: std::io::Result<Vec<File>> = (0..20).map(|_| File::open(&original)).collect();
            assert!(open.is_ok(), "no descriptors left: {:?}", open.err());
            for copy in &copies {
                assert_eq!(std::fs::read(copy.path()).unwrap(), vec![0; 1000]);
            }
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let original = dir.path().join("zeros.gz");
        std::fs::write(&original, gzipped_zeros(1000)).unwrap();
        let test = towers_testing::test_name!("copies_past_half_the_descriptors_are_named");
        let child =
            towers_testing::child::child(&test, original.to_str().unwrap(), &[], "ulimit -n 64")
                .env("TMPDIR", dir.path())
                .output()
                .unwrap();
        let said = String::from_utf8_lossy(&child.stdout) + String::from_utf8_lossy(&child.stderr);
        assert!(
            child.status.success() && said.contains("1 passed"),
            "{said}"
        );
    }
}
