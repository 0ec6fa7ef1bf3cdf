//! PyTorch zips that the zip crate misreads, read through a renamed copy
//! ([`readable_copy`]).
//!
//! `torch.save` names a zip's entries after the file it writes (`<stem>/data.pkl`,
//! `<stem>/data/0`, ...) and puts zip64 end records (76 bytes) between the central directory
//! and the classic end record. zip 9.8 and 9.9 (the versions burn-store's `pytorch-reader`
//! takes) first look for the directory where the end record's size field puts it, right
//! before the end record: 76 bytes past the directory's start. When the directory's first
//! entry is itself 76 bytes long, which a 21-character stem makes (`resnet18_finetuned_v2.pth`),
//! the second entry stands there, is taken for the first, and the directory runs into the
//! zip64 records: "Invalid Central Directory header", for any such file.
//!
//! `pytorch-reader` opens files by path with the zip crate's defaults, and takes no reader.
//! So such a file is copied, entry by entry, to a temporary file whose entries stand under
//! `archive/` (`pytorch-reader` takes the folder of `data.pkl`, whatever its name), having been
//! read with the archive's start given (offset 0), which skips that search. torch stores its
//! entries uncompressed, one after another, so the copy is at most the file's size: a
//! compressed entry, or entries that share their bytes (a crafted directory can name one
//! entry's data a thousand times), are refused rather than copied onto the disk.

use std::fs::File;
use std::io::{self, BufReader, BufWriter};
use std::path::Path;

use tempfile::NamedTempFile;
use zip::read::{ArchiveOffset, Config};
use zip::result::{ZipError, ZipResult};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// A copy of the PyTorch zip at `path` that `pytorch-reader` reads: its entries renamed from
/// `<stem>/` to `archive/`, in a temporary file deleted when the copy is dropped.
pub(crate) fn readable_copy(path: &Path) -> ZipResult<NamedTempFile> {
    let config = Config {
        archive_offset: ArchiveOffset::Known(0),
    };
    let file = File::open(path)?;
    let mut budget = file.metadata()?.len();
    let mut archive = ZipArchive::with_config(config, BufReader::new(file))?;
    let copy = tempfile::Builder::new()
        .prefix("towers-torch-")
        .suffix(".pth")
        .tempfile()?;
    let mut writer = ZipWriter::new(BufWriter::new(copy.as_file()));
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index)?;
        if entry.compression() != CompressionMethod::Stored {
            return Err(ZipError::UnsupportedArchive(
                "a compressed entry: torch.save stores its entries uncompressed",
            ));
        }
        budget = budget
            .checked_sub(entry.compressed_size())
            .ok_or(ZipError::InvalidArchive(
                "entries larger than the file together: they share their bytes".into(),
            ))?;
        let name = entry.name()?;
        let name = match name.split_once('/') {
            Some((_, within)) => format!("archive/{within}"),
            None => name.to_string(),
        };
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .large_file(entry.size() >= u64::from(u32::MAX));
        writer.start_file(name, options)?;
        io::copy(&mut entry, &mut writer)?;
    }
    writer.finish()?.into_inner().map_err(|e| e.into_error())?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The names and contents of the zip at `path`, read with the crate's defaults.
    fn entries(path: &Path) -> ZipResult<Vec<(String, Vec<u8>)>> {
        let mut archive = ZipArchive::new(File::open(path)?)?;
        (0..archive.len())
            .map(|index| {
                let mut entry = archive.by_index(index)?;
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes)?;
                Ok((entry.name()?.to_string(), bytes))
            })
            .collect()
    }

    #[test]
    fn a_misread_zip_is_copied_to_one_read_whole() {
        let torch = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/torch_checkpoints/finetuned_resnet18_v2.pth");
        assert!(
            entries(&torch).is_err(),
            "the crate reads it: see the module docs"
        );
        let copy = readable_copy(&torch).unwrap();
        let copied = entries(copy.path()).unwrap();
        let config = Config {
            archive_offset: ArchiveOffset::Known(0),
        };
        let mut original = ZipArchive::with_config(config, File::open(&torch).unwrap()).unwrap();
        assert_eq!(copied.len(), original.len());
        for (index, (name, bytes)) in copied.iter().enumerate() {
            let mut entry = original.by_index(index).unwrap();
            let within = entry.name().unwrap().split_once('/').unwrap().1.to_string();
            assert_eq!(name, &format!("archive/{within}"));
            let mut want = Vec::new();
            entry.read_to_end(&mut want).unwrap();
            assert_eq!(bytes, &want, "{name}");
        }
    }

    /// A zip of one 64 KiB entry, `deflated` or stored, and `shared` more entries naming its
    /// bytes.
    fn zip_of(dir: &Path, deflated: bool, shared: usize) -> std::path::PathBuf {
        let path = dir.join(format!("{deflated}-{shared}.pth"));
        let mut writer = ZipWriter::new(File::create(&path).unwrap());
        let method = match deflated {
            true => CompressionMethod::Deflated,
            false => CompressionMethod::Stored,
        };
        let options = SimpleFileOptions::default().compression_method(method);
        writer.start_file("m/data/0", options).unwrap();
        writer.write_all(&[7u8; 1 << 16]).unwrap();
        for n in 0..shared {
            writer
                .shallow_copy_file("m/data/0", &format!("m/data/{}", n + 1))
                .unwrap();
        }
        writer.finish().unwrap();
        path
    }

    #[test]
    fn compressed_and_shared_entries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(readable_copy(&zip_of(dir.path(), false, 0)).is_ok());
        let error = readable_copy(&zip_of(dir.path(), true, 0)).unwrap_err();
        assert!(error.to_string().contains("compressed entry"), "{error}");
        let error = readable_copy(&zip_of(dir.path(), false, 3)).unwrap_err();
        assert!(error.to_string().contains("share their bytes"), "{error}");
    }
}
