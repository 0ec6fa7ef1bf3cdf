//! Image folders, `root/<class_name>/.../<image>`, the layout PyTorch users bring, read as
//! torchvision's `ImageFolder` reads them: the same classes, the same images, in the same order
//! (checked against torchvision's own listing in `tests/image_folder.rs`).
//!
//! Each image file is one record, labelled by its class folder. Its pixels: with torchvision's
//! transforms (`prepare` hands them the file's bytes) as Pillow decodes them; decoded alone
//! ([`RecordFormat::decode`], a [`RecordDataset`](crate::format::RecordDataset)'s `try_get`)
//! as TF's pipeline decodes them (its fast JPEG DCT; 16-bit PNGs rounded to 8 bits, where
//! Pillow's `convert("RGB")` clips 16-bit grey), which can differ from torchvision's by a few
//! levels.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use walkdir::WalkDir;

use crate::atomic_file::write_atomic;
use crate::codec::decode_image;
use crate::error::{Error, Result};
use crate::format::{Example, Prepared, RecordFormat, RecordSpan, not_a_file, record_error};
use crate::rng::Rng;
use crate::transforms::Transform;

/// torchvision's `IMG_EXTENSIONS`: a file is an image when its name ends with one of these, in
/// any case (`name.lower().endswith(...)`). Every one decodes here (`codec`).
pub const IMAGE_EXTENSIONS: [&str; 9] = [
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp",
];

/// A scanned image folder: its classes and image files.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    files: Vec<PathBuf>,
    labels: Arc<HashMap<PathBuf, i64>>,
}

impl ImageFolder {
    /// Scans `root` as torchvision's `ImageFolder(root)` does:
    /// - the classes are the sub-folders of `root` (hidden ones too, symbolic links followed),
    ///   sorted by code point; class `i` is label `i`;
    /// - the images are the files at any depth under a class folder (links followed) whose
    ///   names end with one of [`IMAGE_EXTENSIONS`], in the order of Python's
    ///   `sorted(os.walk(...))`: by folder path string, then by name.
    ///
    /// Names need not be UTF-8: they sort as Python sorts them (its strings hold each byte
    /// that is not UTF-8 as a code point of its own, U+DC80 to U+DCFF), and a class name shows
    /// such a byte as U+FFFD in [`classes`](Self::classes) and the label map.
    ///
    /// Errors name the folder or file: `root` missing or without class sub-folders, a class
    /// without an image (torchvision refuses it too; see
    /// [`ImageFolder::scan_allowing_empty_classes`]), a symbolic-link loop, a broken link or
    /// unreadable folder, an image name on something other than a file (a FIFO would hang its
    /// reader).
    pub fn scan(root: &Path) -> Result<Self> {
        Self::scan_with(root, false)
    }

    /// [`ImageFolder::scan`], where a class folder without images still takes its label
    /// (torchvision's `allow_empty=True`): weights of 1000 classes evaluated on a few of them.
    /// Class folders without any image give an empty folder, as torchvision's does.
    pub fn scan_allowing_empty_classes(root: &Path) -> Result<Self> {
        Self::scan_with(root, true)
    }

    fn scan_with(root: &Path, allow_empty: bool) -> Result<Self> {
        let class_names = class_folders(root)?;
        let mut files = Vec::new();
        let mut labels = HashMap::new();
        let mut empty = Vec::new();
        for (label, class) in class_names.iter().enumerate() {
            let images = images_under(&root.join(class))?;
            if images.is_empty() {
                empty.push(class.to_string_lossy());
            }
            for image in images {
                labels.insert(image.clone(), label as i64);
                files.push(image);
            }
        }
        if files.is_empty() && !allow_empty {
            return Err(no_image(root, "under any class folder"));
        }
        if !empty.is_empty() && !allow_empty {
            let classes = format!(
                "in the class folders {} (torchvision's ImageFolder refuses them too, unless \
                 empty classes are allowed)",
                empty.join(", ")
            );
            return Err(no_image(root, &classes));
        }
        let classes = class_names.iter().map(|name| name.to_string_lossy().into());
        Ok(Self {
            root: root.to_path_buf(),
            classes: classes.collect(),
            files,
            labels: Arc::new(labels),
        })
    }

    /// Class names (a byte that is not UTF-8 shown as U+FFFD); class `i` is label `i`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Every image, by class, then in torchvision's order within the class (see
    /// [`ImageFolder::scan`]).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The label of one of [`ImageFolder::files`].
    pub fn label(&self, file: &Path) -> Option<i64> {
        self.labels.get(file).copied()
    }

    /// The [`RecordFormat`] reading these images with their labels.
    pub fn format(&self) -> ImageFolderFormat {
        ImageFolderFormat {
            labels: Arc::clone(&self.labels),
        }
    }

    /// Writes the label map, one `label<TAB>class` line per class, to `path`, atomically.
    pub fn write_label_map(&self, path: &Path) -> Result<()> {
        write_atomic(path, |file| {
            self.classes
                .iter()
                .enumerate()
                .try_for_each(|(label, class)| writeln!(file, "{label}\t{class}"))
        })
        .map_err(Error::io_at(path))
    }

    /// The folder scanned.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// The names of the sub-folders of `root`, as torchvision's `find_classes`: `os.scandir`
/// entries whose `is_dir()` (links followed) holds, sorted as Python sorts them
/// ([`python_order`]).
fn class_folders(root: &Path) -> Result<Vec<OsString>> {
    if !root.is_dir() {
        let reason = "no such directory (expected root/<class>/<image>)";
        return Err(file_error(root, reason.into()));
    }
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(Error::io_at(root))? {
        let entry = entry.map_err(Error::io_at(root))?;
        if entry.path().is_dir() {
            classes.push(entry.file_name());
        }
    }
    classes.sort_by_cached_key(|name| python_order(name));
    match classes.is_empty() {
        true => Err(file_error(root, "no class sub-folders".into())),
        false => Ok(classes),
    }
}

/// The key that sorts names as Python sorts its strings of them: by code point, where Python
/// takes each byte that is not part of UTF-8 as the code point U+DC00 plus the byte (its
/// "surrogate escapes", `os.fsdecode`). Comparing bytes (`OsStr`'s order) agrees on UTF-8
/// but not on those: Python puts `b\xff` (U+DCFF) before `b\u{fffd}`, bytes put it after.
fn python_order(name: &OsStr) -> Vec<u32> {
    let mut key = Vec::with_capacity(name.len());
    for chunk in name.as_encoded_bytes().utf8_chunks() {
        key.extend(chunk.valid().chars().map(u32::from));
        key.extend(chunk.invalid().iter().map(|&byte| 0xDC00 + u32::from(byte)));
    }
    key
}

/// The images under the class folder `dir`, in torchvision's order: `sorted(os.walk(dir,
/// followlinks=True))` orders the walk's folders by their path strings (so `a b` before
/// `a/c`, where Rust's `Path` order puts `a/c` first), then each folder's file names, both
/// as Python orders strings ([`python_order`]). Python's walk ignores unreadable folders and
/// follows link loops until the OS stops it; here both are errors.
fn images_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<(Vec<u32>, Vec<u32>, PathBuf)> = Vec::new();
    for entry in WalkDir::new(dir).follow_links(true) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => match walk_error(dir, error) {
                Some(error) => return Err(error),
                None => continue,
            },
        };
        if entry.file_type().is_dir() || !is_image(entry.path()) {
            continue;
        }
        if !entry.file_type().is_file() {
            return Err(not_a_file(entry.path()));
        }
        let folder = entry.path().parent().unwrap_or(dir);
        let name = entry.file_name();
        let path = entry.path().to_path_buf();
        found.push((python_order(folder.as_os_str()), python_order(name), path));
    }
    found.sort();
    Ok(found.into_iter().map(|(_, _, path)| path).collect())
}

/// What a failed step of the walk under `dir` means: a link loop, or an unreadable entry,
/// is an error; a broken link is one only when its name says image (torchvision would list
/// it and fail on reading it), and is skipped otherwise, as torchvision passes over it.
fn walk_error(dir: &Path, error: walkdir::Error) -> Option<Error> {
    let path = error.path().unwrap_or(dir).to_path_buf();
    if let Some(ancestor) = error.loop_ancestor() {
        let reason = format!("a symbolic-link loop back to {}", ancestor.display());
        return Some(file_error(&path, reason));
    }
    let broken_link = path.is_symlink() && !path.exists();
    match (broken_link, is_image(&path)) {
        (true, false) => None,
        (true, true) => Some(file_error(&path, "a broken symbolic link".into())),
        (false, _) => Some(Error::Io {
            error: error.into(),
            path,
        }),
    }
}

/// Whether `path`'s name ends with one of [`IMAGE_EXTENSIONS`], in any case.
fn is_image(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let name = name.to_lowercase();
    IMAGE_EXTENSIONS.iter().any(|ext| name.ends_with(ext))
}

fn no_image(root: &Path, place: &str) -> Error {
    let extensions = IMAGE_EXTENSIONS.join(" ");
    file_error(root, format!("no image ({extensions}) {place}"))
}

fn file_error(path: &Path, reason: String) -> Error {
    Error::File {
        path: path.to_path_buf(),
        reason,
    }
}

/// Reads image files of an [`ImageFolder`]: one record per file, labelled by its class folder.
#[derive(Debug, Clone)]
pub struct ImageFolderFormat {
    labels: Arc<HashMap<PathBuf, i64>>,
}

impl RecordFormat for ImageFolderFormat {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        let len = std::fs::metadata(path).map_err(Error::io_at(path))?.len();
        Ok(vec![RecordSpan {
            offset: 0,
            len: len as usize,
        }])
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        Ok(Example {
            label: self.label(path, record)?,
            image: decode_image(bytes).map_err(|reason| record_error(path, record, reason))?,
            boxes: Vec::new(),
        })
    }

    /// Hands the file's bytes to the transform undecoded ([`Transform::apply_encoded`]).
    fn prepare(
        &self,
        path: &Path,
        record: usize,
        bytes: &[u8],
        transform: &dyn Transform,
        rng: &mut Rng,
    ) -> Result<Prepared> {
        let label = self.label(path, record)?;
        let planes = transform
            .apply_encoded(bytes, &[], rng)
            .map_err(|reason| record_error(path, record, reason))?;
        Ok(Prepared { planes, label })
    }
}

impl ImageFolderFormat {
    /// The class of `path`, from its folder.
    fn label(&self, path: &Path, record: usize) -> Result<i64> {
        self.labels
            .get(path)
            .copied()
            .ok_or_else(|| record_error(path, record, "not an image of the scanned folder"))
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;
    use crate::codec::{encode_jpeg, encode_png};
    use crate::image::Image;

    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let img = Image::from_hwc(vec![0.25; 4 * 4 * 3], 4, 4, 3);
        for (class, name, bytes) in [
            ("zebra", "a.JPG", encode_jpeg(&img, 90)),
            ("apple", "b.png", encode_png(&img)),
            ("apple", "a.jpeg", encode_jpeg(&img, 90)),
            ("apple", "notes.txt", b"not an image".to_vec()),
        ] {
            std::fs::create_dir_all(dir.path().join(class)).unwrap();
            std::fs::write(dir.path().join(class).join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn classes_sorted_and_images_labelled() {
        let dir = folder();
        let f = ImageFolder::scan(dir.path()).unwrap();
        assert_eq!(f.classes(), ["apple", "zebra"]);
        let names: Vec<_> = f
            .files()
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(names, ["apple/a.jpeg", "apple/b.png", "zebra/a.JPG"]);
        let format = f.format();
        let zebra = &f.files()[2];
        let ex = format
            .decode(zebra, 0, &std::fs::read(zebra).unwrap())
            .unwrap();
        assert_eq!((ex.label, ex.image.shape()), (1, [4, 4, 3]));
        assert_eq!(f.label(zebra), Some(1));
        let map = dir.path().join("labels.txt");
        f.write_label_map(&map).unwrap();
        assert_eq!(
            std::fs::read_to_string(map).unwrap(),
            "0\tapple\n1\tzebra\n"
        );
    }

    #[test]
    fn bad_folders_and_corrupt_images_are_named() {
        assert!(
            ImageFolder::scan(Path::new("/no/such/folder"))
                .unwrap_err()
                .to_string()
                .contains("no such directory")
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(
            ImageFolder::scan(empty.path())
                .unwrap_err()
                .to_string()
                .contains("no class sub-folders")
        );
        let dir = folder();
        let f = ImageFolder::scan(dir.path()).unwrap();
        let png = &f.files()[1];
        let msg = f
            .format()
            .decode(png, 0, b"\x89PNG\r\n\x1a\nbroken")
            .unwrap_err()
            .to_string();
        assert_error_names(&msg, &["b.png", "record 0"]);
    }

    /// A tree of class folders with one image each, as `(class, name)`.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let png = encode_png(&Image::from_hwc(vec![0.5; 2 * 2 * 3], 2, 2, 3));
        for (class, name) in files {
            std::fs::create_dir_all(dir.path().join(class)).unwrap();
            std::fs::write(dir.path().join(class).join(name), &png).unwrap();
        }
        dir
    }

    fn listed(folder: &ImageFolder) -> Vec<String> {
        let root = folder.root();
        let relative = |p: &PathBuf| p.strip_prefix(root).unwrap().display().to_string();
        folder.files().iter().map(relative).collect()
    }

    #[test]
    fn hidden_files_and_folders_count_as_torchvision_counts_them() {
        let dir = tree(&[(".hidden", "x.png"), ("cat", ".png"), ("cat", "a.PNG.bak")]);
        let folder = ImageFolder::scan(dir.path()).unwrap();
        assert_eq!(folder.classes(), [".hidden", "cat"]);
        assert_eq!(listed(&folder), [".hidden/x.png", "cat/.png"]);
    }

    #[test]
    fn an_empty_class_is_refused_unless_allowed() {
        let dir = tree(&[("cat", "a.png")]);
        std::fs::create_dir(dir.path().join("dog")).unwrap();
        std::fs::write(dir.path().join("dog/readme.txt"), "no image").unwrap();
        let msg = ImageFolder::scan(dir.path()).unwrap_err().to_string();
        assert_error_names(&msg, &["no image", "dog", "torchvision"]);
        let folder = ImageFolder::scan_allowing_empty_classes(dir.path()).unwrap();
        assert_eq!(folder.classes(), ["cat", "dog"]);
        assert_eq!(listed(&folder), ["cat/a.png"]);
    }

    #[test]
    fn links_are_followed_and_loops_and_broken_images_named() {
        use std::os::unix::fs::symlink;
        let elsewhere = tree(&[("pics", "b.png")]);
        let dir = tree(&[("cat", "a.png")]);
        symlink(elsewhere.path().join("pics"), dir.path().join("dog")).unwrap();
        symlink(dir.path().join("cat/a.png"), dir.path().join("cat/c.png")).unwrap();
        symlink("/no/such/file", dir.path().join("cat/gone.txt")).unwrap();
        let folder = ImageFolder::scan(dir.path()).unwrap();
        assert_eq!(folder.classes(), ["cat", "dog"]);
        assert_eq!(listed(&folder), ["cat/a.png", "cat/c.png", "dog/b.png"]);

        symlink("/no/such/file", dir.path().join("cat/gone.png")).unwrap();
        let msg = ImageFolder::scan(dir.path()).unwrap_err().to_string();
        assert_error_names(&msg, &["gone.png", "broken symbolic link"]);
        std::fs::remove_file(dir.path().join("cat/gone.png")).unwrap();

        symlink(dir.path().join("cat"), dir.path().join("cat/again")).unwrap();
        let msg = ImageFolder::scan(dir.path()).unwrap_err().to_string();
        assert_error_names(&msg, &["again", "symbolic-link loop"]);
    }

    #[test]
    fn an_image_name_on_a_fifo_is_refused_not_waited_on() {
        let dir = tree(&[("cat", "a.png")]);
        let fifo = dir.path().join("cat/b.jpg");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
        let msg = ImageFolder::scan(dir.path()).unwrap_err().to_string();
        assert_error_names(&msg, &["b.jpg", "not a regular file"]);
    }

    /// Names that are not UTF-8 sort as torchvision 0.29 sorts them: it listed this tree so
    /// (Python holds the byte `ff` as U+DCFF, before U+FFFD, where byte order puts it last).
    #[test]
    fn names_that_are_not_utf8_sort_as_torchvision_sorts_them() {
        use std::os::unix::ffi::OsStrExt;
        let listing: [&[u8]; 7] = [
            b"c\xff/x.png",
            b"c\xef\xbf\xbd/x.png",
            b"dog/bz.png",
            b"dog/b\xc3\xa9.png",
            b"dog/b\xff.png",
            b"dog/b\xef\xbf\xbd.png",
            b"dog/sub\xff/c.png",
        ];
        let dir = tree(&[("dog", "bz.png")]);
        let png = std::fs::read(dir.path().join("dog/bz.png")).unwrap();
        for name in listing.iter().rev() {
            let path = dir.path().join(OsStr::from_bytes(name));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &png).unwrap();
        }
        let folder = ImageFolder::scan(dir.path()).unwrap();
        assert_eq!(folder.classes(), ["c\u{fffd}", "c\u{fffd}", "dog"]);
        let relative = |path: &PathBuf| path.strip_prefix(dir.path()).unwrap().to_path_buf();
        let listed: Vec<PathBuf> = folder.files().iter().map(relative).collect();
        let expected: Vec<PathBuf> = listing
            .iter()
            .map(|n| OsStr::from_bytes(n).into())
            .collect();
        assert_eq!(listed, expected);
        let labels: Vec<_> = folder.files().iter().map(|f| folder.label(f)).collect();
        assert_eq!(labels[..3], [Some(0), Some(1), Some(2)]);
    }

    /// With empty classes allowed, a tree without any image is an empty folder, as
    /// torchvision's `ImageFolder(root, allow_empty=True)` is (its length 0, its classes all).
    #[test]
    fn a_tree_without_images_is_empty_where_empty_classes_are_allowed() {
        let dir = tree(&[("cat", "notes.txt"), ("dog", "notes.txt")]);
        let msg = ImageFolder::scan(dir.path()).unwrap_err().to_string();
        assert_error_names(&msg, &["no image", "under any class folder"]);
        let folder = ImageFolder::scan_allowing_empty_classes(dir.path()).unwrap();
        assert_eq!(folder.classes(), ["cat", "dog"]);
        assert!(folder.files().is_empty());
    }
}
