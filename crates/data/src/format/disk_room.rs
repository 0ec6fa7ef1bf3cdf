//! [`RoomKeepingWriter`]: a writer that stops, with an error, before its disk fills up.
//!
//! A decompressed copy's size is known only once it is written, and a small compressed file
//! can decompress to about a thousand times its size (deflate's limit is 1032:1, and GZIP
//! members can follow each other without end). A crafted or mistaken file must not fill the
//! disk that the system and other programs share: so copies are written through this, which
//! looks at the free space of the copy's file system every [`CHECK_EVERY`] bytes and stops
//! while its reserve is still free: [5% of the disk, at most 1 GiB](DiskSpace::reserve), or
//! half of what was free when the copy began where that is less.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two looks at the free space. `fstatvfs` costs about a microsecond;
/// writing this much takes about a millisecond.
const CHECK_EVERY: u64 = 1 << 20;

/// The largest reserve: 1 GiB, however large the file system.
const MOST_RESERVED: u64 = 1 << 30;

/// A file system's free and total bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiskSpace {
    /// The bytes this process may still write (`f_bavail`: without the root reserve).
    pub(crate) free: u64,
    /// The file system's size in bytes.
    pub(crate) total: u64,
}

impl DiskSpace {
    /// The space of the file system that holds `file`; `None` where it reports no size (some
    /// FUSE and network file systems say 0 of 0 bytes free).
    #[cfg(unix)]
    pub(crate) fn of(file: &File) -> io::Result<Option<Self>> {
        let stats = rustix::fs::fstatvfs(file)?;
        Ok(Self::reported(
            stats.f_bavail.saturating_mul(stats.f_frsize),
            stats.f_blocks.saturating_mul(stats.f_frsize),
        ))
    }

    /// The space a file system reports, `None` when it reports no size.
    #[cfg(unix)]
    fn reported(free: u64, total: u64) -> Option<Self> {
        (total > 0).then_some(Self { free, total })
    }

    /// `None`: not asked outside Unix, where copies are limited by the disk alone.
    #[cfg(not(unix))]
    pub(crate) fn of(_file: &File) -> io::Result<Option<Self>> {
        Ok(None)
    }

    /// The bytes a copy leaves free: 5% of the file system, at most 1 GiB (so that a nearly
    /// full large disk still takes copies that fit).
    pub(crate) fn reserve(self) -> u64 {
        (self.total / 20).min(MOST_RESERVED)
    }

    /// The reserve of a copy that begins with this much free: [`reserve`](Self::reserve), or
    /// half the free space where that is less. A disk already nearly full (shared machines
    /// run so for hours) still takes a copy that fits in half of what is free, and no copy,
    /// nor any number of copies one after another, fills it.
    fn reserve_from_here(self) -> u64 {
        self.reserve().min(self.free / 2)
    }

    /// Whether [`CHECK_EVERY`] more bytes still leave `reserve` free.
    fn has_room(self, reserve: u64) -> bool {
        self.free >= reserve + CHECK_EVERY
    }
}

/// Writes to `inner` while its file system has room: before each [`CHECK_EVERY`] bytes it asks
/// `space` and fails with [`io::ErrorKind::StorageFull`] (nothing of that write written) when
/// they would eat into the reserve (fixed at the first look: [`DiskSpace::reserve_from_here`]).
pub(crate) struct RoomKeepingWriter<W, S> {
    inner: W,
    space: S,
    /// The bytes to leave free, once `space` has been asked.
    reserve: Option<u64>,
    /// Bytes written in all. No write passes a multiple of [`CHECK_EVERY`], so `space` is
    /// asked whenever this is one.
    written: u64,
}

impl<W: Write, S: FnMut() -> io::Result<Option<DiskSpace>>> RoomKeepingWriter<W, S> {
    /// A writer to `inner` that asks `space` for the room left (`DiskSpace::of` the file).
    pub(crate) fn new(inner: W, space: S) -> Self {
        Self {
            inner,
            space,
            reserve: None,
            written: 0,
        }
    }

    /// Fails when the next [`CHECK_EVERY`] bytes would eat into the reserve.
    fn check_room(&mut self) -> io::Result<()> {
        let Some(space) = (self.space)()? else {
            return Ok(());
        };
        let reserve = *self.reserve.get_or_insert(space.reserve_from_here());
        if space.has_room(reserve) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "stopped after {} bytes, to keep {reserve} bytes of its disk free ({} of {} \
                 free): set TMPDIR to a disk with room for the decompressed data, or \
                 decompress the file beforehand (gunzip)",
                self.written, space.free, space.total
            ),
        ))
    }
}

impl<W: Write, S: FnMut() -> io::Result<Option<DiskSpace>>> Write for RoomKeepingWriter<W, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let since_check = self.written % CHECK_EVERY;
        if since_check == 0 {
            self.check_room()?;
        }
        // At most up to the next check, so that no write passes one.
        let room = (CHECK_EVERY - since_check).min(buf.len() as u64) as usize;
        let n = self.inner.write(&buf[..room])?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A disk of `total` bytes with `free` left at first, which shrinks as the writer writes.
    fn shrinking_disk(total: u64, free: u64, written: &std::cell::Cell<u64>) -> DiskSpace {
        DiskSpace {
            free: free.saturating_sub(written.get()),
            total,
        }
    }

    /// Writes `bytes` zeros through a writer on a disk of 100 MiB with `free` MiB left, in
    /// 64 KiB writes: how many got through, and the error that stopped it.
    fn write_zeros(free: u64, bytes: u64) -> (u64, Option<io::Error>) {
        write_bytes_on(free * MIB, bytes)
    }

    /// [`write_zeros`] with `free` in bytes.
    fn write_bytes_on(free: u64, bytes: u64) -> (u64, Option<io::Error>) {
        let written = std::cell::Cell::new(0);
        let mut sink = Vec::new();
        let mut out = RoomKeepingWriter::new(&mut sink, || {
            Ok(Some(shrinking_disk(100 * MIB, free, &written)))
        });
        let chunk = vec![0u8; 1 << 16];
        let mut error = None;
        while written.get() < bytes {
            match out.write_all(&chunk) {
                Ok(()) => written.set(written.get() + chunk.len() as u64),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        assert_eq!(sink.len() as u64, written.get());
        (written.get(), error)
    }

    #[test]
    fn writes_while_the_reserve_stays_free() {
        // 5 MiB reserve of 100: 20 MiB free holds 10 MiB and 1 MiB to spare.
        let (written, error) = write_zeros(20, 10 * MIB);
        assert_eq!(written, 10 * MIB);
        assert!(error.is_none());
    }

    #[test]
    fn stops_before_eating_into_the_reserve() {
        let (written, error) = write_zeros(20, 100 * MIB);
        let error = error.expect("the reserve is kept");
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        // It stopped at a check, with the 5 MiB reserve and less than a check's worth more
        // still free.
        assert_eq!(written % CHECK_EVERY, 0);
        let left = 20 * MIB - written;
        assert!((5 * MIB..6 * MIB).contains(&left), "{left} bytes left");
        let message = error.to_string();
        assert!(
            message.contains(&format!("stopped after {written} bytes")),
            "{message}"
        );
        assert!(message.contains("TMPDIR"), "{message}");
    }

    #[test]
    fn a_nearly_full_disk_gives_a_copy_half_its_free_space() {
        // 5 MiB free, less than the 5 MiB reserve and a check: the copy may take half of it.
        // The look at 2 MiB written finds 3 free, and 2.5 must stay.
        assert_eq!(write_zeros(5, 10 * MIB).0, 2 * MIB);
        // With less than a check's worth and its reserve, nothing.
        let (written, error) = write_zeros(1, MIB);
        assert_eq!(written, 0);
        assert_eq!(error.map(|e| e.kind()), Some(io::ErrorKind::StorageFull));
    }

    #[test]
    fn copies_one_after_another_never_fill_the_disk() {
        // Ten copies that each take all they may, kept: each leaves the 5 MiB reserve or half
        // of what it found, and the disk is never full.
        let mut free = 20 * MIB;
        for _ in 0..10 {
            let (written, error) = write_bytes_on(free, 100 * MIB);
            assert!(error.is_some());
            let left = free - written;
            assert!(
                left >= (5 * MIB).min(free / 2) && left > 0,
                "{left} of {free} bytes"
            );
            free = left;
        }
    }

    #[test]
    fn the_reserve_is_5_percent_up_to_a_gib_or_half_the_free_space() {
        let of = |total| DiskSpace { free: total, total }.reserve_from_here();
        assert_eq!(
            (of(100 * MIB), of(20 << 30), of(1 << 40)),
            (5 * MIB, 1 << 30, 1 << 30)
        );
        // CI's shared disk on 2026-12-04: 555 MiB of 252 GiB free, half of it for a copy.
        let shared = DiskSpace {
            free: 582_082_560,
            total: 270_553_174_016,
        };
        assert_eq!(shared.reserve_from_here(), 291_041_280);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_system_without_a_size_is_not_limited() {
        assert_eq!(DiskSpace::reported(0, 0), None);
        let space = DiskSpace::reported(6 * MIB, 100 * MIB);
        assert_eq!(
            space.map(|space| space.has_room(space.reserve())),
            Some(true)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_real_file_system_is_measured() {
        let file = tempfile::tempfile().unwrap();
        let space = DiskSpace::of(&file).unwrap().expect("Unix answers");
        assert!(0 < space.free && space.free <= space.total, "{space:?}");
    }
}
