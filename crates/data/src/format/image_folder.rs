//! Image folders, `root/<class_name>/<image>`, the layout PyTorch users bring.
//!
//! Classes are the sub-folders, sorted by name, numbered from 0; images are the `.jpg`,
//! `.jpeg` and `.png` files inside them (case-insensitive; other files are ignored, as
//! torchvision's `ImageFolder` does). Each image file is one record.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::atomic_file::write_atomic;
use crate::codec::decode_image;
use crate::error::{Error, Result};
use crate::format::{Example, Prepared, RecordFormat, RecordSpan, record_error};
use crate::rng::Rng;
use crate::transforms::Transform;

/// A scanned image folder: its classes and image files.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    files: Vec<PathBuf>,
    labels: Arc<HashMap<PathBuf, i64>>,
}

impl ImageFolder {
    /// Scans `root`. A missing folder, a folder without class sub-folders, or one without
    /// any image is an error naming it.
    pub fn scan(root: &Path) -> Result<Self> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| Error::Io { path, error }
        };
        if !root.is_dir() {
            return Err(Error::File {
                path: root.to_path_buf(),
                reason: "no such directory (expected root/<class>/<image>)".into(),
            });
        }
        let mut classes: Vec<String> = std::fs::read_dir(root)
            .map_err(io(root))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        classes.sort();
        if classes.is_empty() {
            return Err(Error::File {
                path: root.to_path_buf(),
                reason: "no class sub-folders".into(),
            });
        }
        let mut files = Vec::new();
        let mut labels = HashMap::new();
        for (label, class) in classes.iter().enumerate() {
            let dir = root.join(class);
            let mut images: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map_err(io(&dir))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && is_image(p))
                .collect();
            images.sort();
            for image in images {
                labels.insert(image.clone(), label as i64);
                files.push(image);
            }
        }
        if files.is_empty() {
            return Err(Error::File {
                path: root.to_path_buf(),
                reason: "no .jpg, .jpeg or .png image under any class folder".into(),
            });
        }
        Ok(Self {
            root: root.to_path_buf(),
            classes,
            files,
            labels: Arc::new(labels),
        })
    }

    /// Class names; class `i` is label `i`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Every image, by class then by name.
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
        .map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })
    }

    /// The folder scanned.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

fn is_image(path: &Path) -> bool {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    matches!(ext.as_deref(), Some("jpg" | "jpeg" | "png"))
}

/// Reads image files of an [`ImageFolder`]: one record per file, labelled by its class folder.
#[derive(Debug, Clone)]
pub struct ImageFolderFormat {
    labels: Arc<HashMap<PathBuf, i64>>,
}

impl RecordFormat for ImageFolderFormat {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        let len = std::fs::metadata(path)
            .map_err(|error| Error::Io {
                path: path.to_path_buf(),
                error,
            })?
            .len();
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
}
