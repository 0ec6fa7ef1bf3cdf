//! [`RecordDataset`]: CIFAR-10 files, TFRecord shards and image folders as Burn datasets,
//! checked against the bytes and images the tests wrote, and fed to Burn's own
//! `DataLoaderBuilder`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_data::cifar10::{self, BuiltinCifar10, Cifar10Format, RECORD_BYTES};
use towers_data::codec::encode_png;
use towers_data::inception::TfExampleFormat;
use towers_data::tf_example::ImageRecord;
use towers_data::tfrecord::{TfRecordWriter, masked_crc};
use towers_data::transforms::Identity;
use towers_data::{Example, HostBatch, Image, Pipeline, PipelineConfig, RecordDataset};
use towers_testing::{assert_error_names, report};

/// CHW pixels (as stored in the files) and labels, as tensors: a user's Burn batcher.
#[derive(Clone)]
struct CifarBatcher;

impl Batcher<Example, (Tensor<4>, Tensor<1, Int>)> for CifarBatcher {
    fn batch(&self, items: Vec<Example>, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let n = items.len();
        let labels: Vec<i64> = items.iter().map(|e| e.label).collect();
        let pixels: Vec<f32> = items.into_iter().flat_map(|e| e.image.into_chw()).collect();
        (
            Tensor::from_data(TensorData::new(pixels, [n, 3, 32, 32]), device),
            Tensor::from_data(TensorData::new(labels, [n]), device),
        )
    }
}

/// Every record of `files` straight from the bytes: the label byte, then the CHW pixels.
fn records_in(files: &[PathBuf]) -> Vec<(i64, Vec<f32>)> {
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect::<Vec<u8>>()
        .chunks(RECORD_BYTES)
        .map(|r| (r[0] as i64, r[1..].iter().map(|&b| b as f32).collect()))
        .collect()
}

/// Labels and CHW pixels of every record of `files`, in file order, as our own pipeline reads
/// them (one epoch, in order, no transform).
fn pipeline_read(files: &[PathBuf]) -> (Vec<i64>, Vec<f32>) {
    let config = PipelineConfig::eval(4);
    let pipeline = Pipeline::start(
        config,
        Arc::new(Cifar10Format),
        files.to_vec(),
        Arc::new(Identity),
    )
    .unwrap();
    let batches: Vec<HostBatch> = pipeline.collect::<towers_data::Result<_>>().unwrap();
    let labels = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    let pixels = batches.iter().flat_map(|b| b.images().to_vec()).collect();
    (labels, pixels)
}

/// Burn's data loader over our CIFAR-10 dataset, batches of 4 on flex, in order: the labels
/// and pixels of the records in the files, in file order, the last partial batch included;
/// the same as our own pipeline reads.
#[test]
fn burn_data_loader_reads_our_cifar10_dataset() {
    let data = BuiltinCifar10::create(3, 2, 9).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let dataset = RecordDataset::open(Arc::new(Cifar10Format), files.clone()).unwrap();
    assert_eq!(dataset.len(), 15);
    let loader = DataLoaderBuilder::new(CifarBatcher)
        .batch_size(4)
        .set_device(Device::flex())
        .build(dataset);
    let (mut labels, mut pixels, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for batch in loader.iter() {
        let (images, batch_labels) = batch.unwrap();
        sizes.push(batch_labels.dims()[0]);
        labels.extend(batch_labels.to_data().iter::<i64>());
        pixels.extend(images.to_data().try_to_vec::<f32>().unwrap());
    }
    assert_eq!(sizes, [4, 4, 4, 3]);
    let in_files = records_in(&files);
    let file_labels: Vec<i64> = in_files.iter().map(|(l, _)| *l).collect();
    let file_pixels: Vec<f32> = in_files.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(labels, file_labels, "labels as in the files");
    assert!(pixels == file_pixels, "pixels as in the files");
    let (ours_labels, ours_pixels) = pipeline_read(&files);
    assert_eq!(labels, ours_labels, "labels as our pipeline reads them");
    assert!(pixels == ours_pixels, "pixels as our pipeline reads them");
}

/// A 4x3 image whose pixels are distinct multiples of 1/255 (exact through 8-bit PNG).
fn image(seed: usize) -> Image {
    let data = (0..4 * 3 * 3)
        .map(|i| ((seed * 37 + i * 5) % 256) as f32 / 255.0)
        .collect();
    Image::from_hwc(data, 4, 3, 3)
}

fn assert_same_pixels(got: &Image, want: &Image, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let off = got
        .data()
        .iter()
        .zip(want.data())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(off < 1e-6, "{what}: pixels off by {off}");
}

/// Two shards of tf.train.Examples holding PNGs: every record in order, with its label, and a
/// damaged record an error naming its file and number.
#[test]
fn tfrecord_shards_as_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let shard = |name: &str, seeds: std::ops::Range<usize>| {
        let mut writer = TfRecordWriter::new(Vec::new());
        for s in seeds {
            let record = ImageRecord {
                encoded: encode_png(&image(s)),
                label: (s % 5) as i64,
                ..ImageRecord::default()
            };
            writer.write(&record.encode()).unwrap();
        }
        let path = dir.path().join(name);
        std::fs::write(&path, writer.into_inner().unwrap()).unwrap();
        path
    };
    let files = vec![shard("train-0", 0..3), shard("train-1", 3..7)];
    let dataset = RecordDataset::open(Arc::new(TfExampleFormat::new(5)), files.clone()).unwrap();
    assert_eq!(dataset.len(), 7);
    for s in 0..7 {
        let example = dataset.get(s).unwrap();
        assert_eq!(example.label, (s % 5) as i64, "label of record {s}");
        assert_same_pixels(&example.image, &image(s), &format!("record {s}"));
    }

    // Flip a byte of the last record's data: its data CRC no longer matches.
    let mut bytes = std::fs::read(&files[1]).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0x40;
    std::fs::write(&files[1], bytes).unwrap();
    let err = report(&dataset.get(6).unwrap_err());
    assert_error_names(&err, &["train-1", "record 3"]);
}

/// root/<class>/<image>.png: images in class then name order, labelled by class.
#[test]
fn an_image_folder_as_a_dataset() {
    let root = tempfile::tempdir().unwrap();
    let write = |class: &str, name: &str, seed: usize| {
        let dir = root.path().join(class);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), encode_png(&image(seed))).unwrap();
    };
    write("cat", "b.png", 1);
    write("cat", "a.png", 0);
    write("dog", "a.png", 2);
    let dataset = RecordDataset::image_folder(root.path()).unwrap();
    assert_eq!(dataset.len(), 3);
    for (i, label) in [0, 0, 1].into_iter().enumerate() {
        let example = dataset.get(i).unwrap();
        assert_eq!(example.label, label, "label of image {i}");
        assert_same_pixels(&example.image, &image(i), &format!("image {i}"));
    }
}

/// A CIFAR-10 file cut short after it was indexed: reading a lost record names file and
/// record; an index past the end is an error, not a panic.
#[test]
fn a_lost_record_is_an_error_naming_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path: &Path = &dir.path().join("data_batch_1.bin");
    std::fs::write(path, vec![1u8; 4 * RECORD_BYTES]).unwrap();
    let dataset = RecordDataset::open(Arc::new(Cifar10Format), vec![path.into()]).unwrap();
    std::fs::write(path, vec![1u8; 2 * RECORD_BYTES]).unwrap();
    assert_eq!(dataset.get(1).unwrap().label, 1);
    let err = report(&dataset.get(3).unwrap_err());
    assert_error_names(&err, &["data_batch_1.bin", "record 3"]);
    assert!(dataset.get(4).is_err());
}

/// A length from a file that claims a terabyte in a few bytes of disk (a sparse file): an image
/// file of the folder, a TFRecord header. Reading it would abort the process on allocating; it
/// is an error naming file, record and the memory there is, and the files' other records
/// still read.
#[test]
fn a_record_longer_than_memory_is_an_error_not_an_allocation() {
    const TERABYTE: u64 = 1 << 40;
    let root = tempfile::tempdir().unwrap();
    let cat = root.path().join("cat");
    std::fs::create_dir_all(&cat).unwrap();
    std::fs::write(cat.join("a.png"), encode_png(&image(0))).unwrap();
    let huge = std::fs::File::create(cat.join("huge.jpg")).unwrap();
    huge.set_len(TERABYTE).unwrap();
    let dataset = RecordDataset::image_folder(root.path()).unwrap();
    assert_same_pixels(&dataset.get(0).unwrap().image, &image(0), "a.png");
    let err = report(&dataset.get(1).unwrap_err());
    let names = [
        "huge.jpg",
        "record 0",
        "1099511627776 bytes",
        "memory available",
    ];
    assert_error_names(&err, &names);

    let path = root.path().join("train-0");
    let mut writer = TfRecordWriter::new(Vec::new());
    let record = ImageRecord {
        encoded: encode_png(&image(1)),
        label: 1,
        ..ImageRecord::default()
    };
    writer.write(&record.encode()).unwrap();
    let mut bytes = writer.into_inner().unwrap();
    let claimed = TERABYTE.to_le_bytes();
    bytes.extend_from_slice(&claimed);
    bytes.extend_from_slice(&masked_crc(&claimed).to_le_bytes());
    let size = bytes.len() as u64 + TERABYTE + 4;
    std::fs::write(&path, bytes).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size)
        .unwrap();
    let dataset = RecordDataset::open(Arc::new(TfExampleFormat::new(2)), vec![path]).unwrap();
    assert_eq!(dataset.get(0).unwrap().label, 1);
    let err = report(&dataset.get(1).unwrap_err());
    assert_error_names(&err, &["train-0", "record 1", "memory available"]);
}

/// A FIFO among the dataset files (a shard's name on one): opening it would wait for a writer
/// forever, as TF's reader does; it is refused, named, before it is opened. A folder too.
#[test]
fn a_fifo_or_folder_among_the_files_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("train-00000-of-00001");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
    for path in [fifo.clone(), dir.path().to_path_buf()] {
        let (sent, opened) = std::sync::mpsc::channel();
        let file = path.clone();
        std::thread::spawn(move || {
            let format = Arc::new(TfExampleFormat::new(2));
            sent.send(RecordDataset::open(format, vec![file]).map(|_| ()))
        });
        let Ok(opened) = opened.recv_timeout(std::time::Duration::from_secs(30)) else {
            // A writer lets the reader go, so that the failure does not hang the tests too.
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
            panic!("{}: still opening after 30 s", path.display());
        };
        let err = report(&opened.unwrap_err());
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_error_names(&err, &[name, "not a regular file"]);
    }
}
